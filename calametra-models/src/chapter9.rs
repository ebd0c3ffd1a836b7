//! USB chapter 9 for model authors: the standard request codes, the string descriptor
//! encoding, and what chapter 9 itself says about a standard GET_DESCRIPTOR a device has no
//! descriptor for (the evidence a model cites when it stalls such a request without recording
//! a model gap). The shipped models answer their standard requests with these; a model of
//! your own should too, rather than a copy.
//!
//! ```
//! use calametra_models::chapter9::{self, GET_DESCRIPTOR};
//! assert_eq!(GET_DESCRIPTOR, 6);
//! assert_eq!(chapter9::string_descriptor("Hi"), [6, 3, b'H', 0, b'i', 0]);
//! assert!(chapter9::absent_descriptor(0x0a).is_some()); // no DEBUG descriptor: a stall
//! assert!(chapter9::absent_descriptor(0x21).is_none()); // a class type: the spec's to say
//! ```
//!
//! Only descriptor types the USB specifications define at device level are here. Class and
//! vendor types (a HID report, a DFU functional descriptor a spec lacks, anything unassigned)
//! are not: whether a device has one is a fact about that device, so asking a model whose spec
//! is silent stays a model gap. The device qualifier and other-speed configuration are not here
//! either: what a device answers depends on its speed, which each model knows.

/// GET_STATUS (USB 2.0 table 9-4).
pub const GET_STATUS: u8 = 0;
/// CLEAR_FEATURE.
pub const CLEAR_FEATURE: u8 = 1;
/// SET_FEATURE.
pub const SET_FEATURE: u8 = 3;
/// SET_ADDRESS.
pub const SET_ADDRESS: u8 = 5;
/// GET_DESCRIPTOR.
pub const GET_DESCRIPTOR: u8 = 6;
/// GET_CONFIGURATION.
pub const GET_CONFIGURATION: u8 = 8;
/// SET_CONFIGURATION.
pub const SET_CONFIGURATION: u8 = 9;
/// GET_INTERFACE.
pub const GET_INTERFACE: u8 = 10;
/// SET_INTERFACE.
pub const SET_INTERFACE: u8 = 11;

/// A string descriptor (USB 2.0 §9.6.7): bLength, type 3, the text in UTF-16LE. The text
/// must fit (at most 126 UTF-16 code units); a longer one is cut there, so bLength stays
/// right.
pub fn string_descriptor(text: &str) -> Vec<u8> {
    let units: Vec<u16> = text.encode_utf16().take(126).collect();
    let mut v = Vec::with_capacity(2 + units.len() * 2);
    v.push((2 + units.len() * 2) as u8);
    v.push(3);
    for u in units {
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

/// Why GET_DESCRIPTOR(`ty`) is a Request Error (a stall) for a device whose descriptor set (the
/// spec's exact bytes, read whole from a capture or written whole from a published spec) has no
/// descriptor of type `ty`; `None` when the USB specifications do not settle it.
///
/// USB 2.0 §9.4.3 and USB 3.2 §9.4.3: "If a device does not support a requested descriptor, it
/// responds with a Request Error"; GetDescriptor() to a device returns device, configuration,
/// string and (USB 3.2) BOS descriptors, and interface, endpoint and endpoint companion
/// descriptors only inside a configuration.
pub fn absent_descriptor(ty: u8) -> Option<&'static str> {
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

/// A standard request the model has no evidence for: recorded as a model gap in `state`, named
/// by the request (`GET_INTERFACE (bmRequestType 0x81, wValue 0x0000, wIndex 0x0001)`), and
/// stalled, the safest answer (a model never turns the unknown into a pass).
pub fn standard_gap(
    cx: &mut calametra_core::usb::DevCtx<'_>,
    setup: &calametra_core::usb::Setup,
    state: &str,
) -> calametra_core::usb::Reply {
    let name = setup.standard_name().unwrap_or("standard request");
    cx.model_gap(
        &format!(
            "{name} (bmRequestType {:#04x}, wValue {:#06x}, wIndex {:#06x})",
            setup.request_type, setup.value, setup.index
        ),
        state,
    );
    calametra_core::usb::Reply::Stall
}

#[cfg(test)]
mod tests {
    use super::{absent_descriptor, string_descriptor};

    #[test]
    fn a_string_descriptor_is_its_length_type_and_utf16le() {
        assert_eq!(string_descriptor(""), [2, 3]);
        assert_eq!(string_descriptor("é"), [4, 3, 0xe9, 0]);
        let long = string_descriptor(&"x".repeat(200));
        assert_eq!((long.len(), long[0]), (254, 254));
    }

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
