//! A raw `bmRequestType`, as published host libraries pass it (dfu-core's IO trait hands over
//! the byte), split into the [`ControlType`] and [`Recipient`] that `UsbInterface`'s
//! [`ControlIn`](calametra_usb::ControlIn) and [`ControlOut`](calametra_usb::ControlOut) take.
//!
//! The direction bit is not read here: the IO call says it (`read_control` is IN,
//! `write_control` OUT), and dfu-core leaves the bit clear on its reads (DFU_GETSTATUS comes
//! as `0x21`, not `0xa1`), as libusb-based IO layers expect, which set it themselves. When
//! `calametra-usb` grows its own splitting helper, this module gives way to it.

use calametra_usb::{ControlType, Recipient, Setup};

/// Splits `bmRequestType` into its type and recipient; the reserved type (3) and recipients
/// (4 to 31) are refused, naming the byte.
pub fn split(request_type: u8) -> Result<(ControlType, Recipient), String> {
    // One parser of the fields: `Setup`'s.
    let setup = Setup {
        request_type,
        request: 0,
        value: 0,
        index: 0,
        length: 0,
    };
    let ty = setup.control_type().ok_or_else(|| {
        format!("bmRequestType {request_type:#04x}: type 3 is reserved (expected standard, class or vendor)")
    })?;
    if request_type & 0x1f > 3 {
        return Err(format!(
            "bmRequestType {request_type:#04x}: recipient {} is reserved (expected 0 to 3)",
            request_type & 0x1f
        ));
    }
    Ok((ty, setup.recipient()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dfu_class_requests_split_whatever_their_direction_bit() {
        assert_eq!(split(0x21), Ok((ControlType::Class, Recipient::Interface)));
        assert_eq!(split(0xa1), Ok((ControlType::Class, Recipient::Interface)));
        assert_eq!(split(0x80), Ok((ControlType::Standard, Recipient::Device)));
        assert_eq!(split(0x42), Ok((ControlType::Vendor, Recipient::Endpoint)));
        assert_eq!(split(0x03), Ok((ControlType::Standard, Recipient::Other)));
    }

    #[test]
    fn reserved_types_and_recipients_are_refused_naming_the_byte() {
        let e = split(0x61).unwrap_err();
        assert!(e.contains("0x61") && e.contains("type 3"), "{e}");
        let e = split(0x25).unwrap_err();
        assert!(e.contains("0x25") && e.contains("recipient 5"), "{e}");
    }
}
