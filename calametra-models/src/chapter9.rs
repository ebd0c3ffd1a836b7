//! What USB chapter 9 itself says about a standard GET_DESCRIPTOR a device has no descriptor
//! for: the evidence a model cites when it stalls such a request without recording a model gap.
//!
//! Only descriptor types the USB specifications define at device level are here. Class and
//! vendor types (a HID report, a DFU functional descriptor a spec lacks, anything unassigned)
//! are not: whether a device has one is a fact about that device, so asking a model whose spec
//! is silent stays a model gap. The device qualifier and other-speed configuration are not here
//! either: what a device answers depends on its speed, which each model knows.

/// Why GET_DESCRIPTOR(`ty`) is a Request Error (a stall) for a device whose descriptor set (the
/// spec's exact bytes, read whole from a capture or written whole from a published spec) has no
/// descriptor of type `ty`; `None` when the USB specifications do not settle it.
///
/// USB 2.0 §9.4.3 and USB 3.2 §9.4.3: "If a device does not support a requested descriptor, it
/// responds with a Request Error"; GetDescriptor() to a device returns device, configuration,
/// string and (USB 3.2) BOS descriptors, and interface, endpoint and endpoint companion
/// descriptors only inside a configuration.
pub(crate) fn absent_descriptor(ty: u8) -> Option<&'static str> {
    Some(match ty {
        4 | 5 => "USB 2.0 §9.4.3: interface and endpoint descriptors are returned only as part of a configuration descriptor",
        8 => "USB 2.0 §9.4.3: no INTERFACE_POWER descriptor in the descriptor set",
        9 => "USB 2.0 §9.4.3: no OTG descriptor in the descriptor set (not an OTG device)",
        0x0a => "USB 2.0 §9.4.3 and the Debug Device ECN: no DEBUG descriptor (no debug port)",
        0x0b => "USB 2.0 §9.4.3: interface association descriptors are returned only as part of a configuration descriptor",
        0x10 => "USB 3.2 §9.4.3: device capability descriptors are returned only as part of the BOS descriptor",
        0x30 | 0x31 => "USB 3.2 §9.4.3: endpoint companion descriptors are returned only as part of a configuration descriptor",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::absent_descriptor;

    #[test]
    fn only_standard_types_are_settled() {
        for ty in [4, 5, 8, 9, 0x0a, 0x0b, 0x10, 0x30, 0x31] {
            assert!(absent_descriptor(ty).is_some_and(|c| c.contains("§9.4.3")));
        }
        // Served or speed-dependent (1, 2, 3, 6, 7, 15), class (0x21 DFU functional, HID) and
        // vendor types: not settled here.
        for ty in [1, 2, 3, 6, 7, 0x0f, 0x21, 0x22, 0x24, 0x41, 0xff] {
            assert_eq!(absent_descriptor(ty), None, "type {ty:#04x}");
        }
    }
}
