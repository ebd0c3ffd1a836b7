//! The update a dfu-core user writes: find the DFU interface and its functional descriptor,
//! detach a run-time device into DFU mode (dfu-core's `detach`, then its `usb_reset` when the
//! device will not detach itself), and hand the image to dfu-core's
//! [`DfuAsync::download_from_slice`]. No retries and no verification of its own: what dfu-core
//! reports is what the user reports, which is what the scenarios judge.

use crate::io::{DfuCoreIo, DfuIoError, CONTROL_TIMEOUT};
use calametra_usb::{ControlIn, ControlType, Recipient, TransferError, UsbInterface};
use dfu_core::asynchronous::DfuAsync;
use dfu_core::functional_descriptor::FunctionalDescriptor;
use std::fmt;
use std::time::Duration;

/// How often the host looks for the device in DFU mode after detaching it.
pub const REENUMERATE_POLL: Duration = Duration::from_millis(10);

/// What the device's configuration descriptor says about DFU.
#[derive(Clone, Copy, Debug)]
pub struct DfuInfo {
    /// `bInterfaceNumber` of the DFU interface (class 0xfe, subclass 0x01).
    pub interface_number: u8,
    /// `bInterfaceProtocol` 2: the device is in DFU mode (1: run-time mode).
    pub dfu_mode: bool,
    /// The DFU functional descriptor, as dfu-core parses it.
    pub descriptor: FunctionalDescriptor,
}

/// What a successful update reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// dfu-core's answer: `true` (it returned `Some`) when the device stayed on the bus, `false`
    /// when dfu-core reset it after the download.
    pub stayed_on_bus: bool,
}

/// Why an update failed.
#[derive(Debug)]
pub enum UpdateError {
    /// Reading the configuration descriptor failed.
    Descriptor(TransferError),
    /// The configuration descriptor has no DFU interface with a functional descriptor, or is
    /// malformed (the message says where).
    NotDfu(String),
    /// dfu-core (or its IO) failed.
    Dfu(DfuIoError),
    /// After the detach, the device never showed its DFU-mode interface.
    NeverInDfuMode,
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Descriptor(e) => write!(f, "reading the configuration descriptor: {e}"),
            UpdateError::NotDfu(e) => write!(f, "not a DFU device: {e}"),
            UpdateError::Dfu(e) => write!(f, "{e}"),
            UpdateError::NeverInDfuMode => f.write_str("the device never came back in DFU mode"),
        }
    }
}

impl std::error::Error for UpdateError {}

impl From<DfuIoError> for UpdateError {
    fn from(e: DfuIoError) -> Self {
        UpdateError::Dfu(e)
    }
}

/// GET_DESCRIPTOR(CONFIGURATION 0) of `len` bytes.
async fn configuration<I: UsbInterface>(iface: &I, len: u16) -> Result<Vec<u8>, UpdateError> {
    let req = ControlIn {
        control_type: ControlType::Standard,
        recipient: Recipient::Device,
        request: 6,
        value: 0x0200,
        index: 0,
        length: len,
    };
    iface
        .control_in(req, CONTROL_TIMEOUT)
        .await
        .map_err(UpdateError::Descriptor)
}

/// Reads the configuration descriptor and finds the DFU interface in it.
pub async fn read_dfu_info<I: UsbInterface>(iface: &I) -> Result<DfuInfo, UpdateError> {
    let head = configuration(iface, 9).await?;
    if head.len() < 4 {
        return Err(UpdateError::NotDfu(format!(
            "the configuration descriptor's header is {} bytes, expected 9",
            head.len()
        )));
    }
    let total = u16::from_le_bytes([head[2], head[3]]);
    let all = configuration(iface, total).await?;
    parse_dfu_info(&all)
}

/// Finds the DFU interface and its functional descriptor in a configuration descriptor.
pub fn parse_dfu_info(config: &[u8]) -> Result<DfuInfo, UpdateError> {
    let mut at = 0;
    let mut interface: Option<(u8, bool)> = None;
    while at < config.len() {
        let len = config[at] as usize;
        if len < 2 || at + len > config.len() {
            return Err(UpdateError::NotDfu(format!(
                "the descriptor at byte {at} has bLength {len}, past the {} bytes read",
                config.len()
            )));
        }
        let d = &config[at..at + len];
        match d[1] {
            4 if len >= 9 => {
                interface = (d[5] == 0xfe && d[6] == 0x01).then_some((d[2], d[7] == 2));
            }
            0x21 => {
                if let Some((interface_number, dfu_mode)) = interface {
                    let descriptor = match FunctionalDescriptor::from_bytes(d) {
                        Some(Ok(f)) => f,
                        Some(Err(e)) => {
                            return Err(UpdateError::NotDfu(format!(
                                "the functional descriptor at byte {at}: {e}"
                            )))
                        }
                        None => continue,
                    };
                    return Ok(DfuInfo {
                        interface_number,
                        dfu_mode,
                        descriptor,
                    });
                }
            }
            _ => {}
        }
        at += len;
    }
    Err(UpdateError::NotDfu(
        "no interface of class 0xfe subclass 0x01 followed by a functional descriptor (0x21)"
            .into(),
    ))
}

/// Updates the device behind `iface` to `image` with dfu-core.
pub async fn update<I: UsbInterface + Clone>(
    iface: &I,
    image: &[u8],
) -> Result<Report, UpdateError> {
    let mut info = read_dfu_info(iface).await?;
    if !info.dfu_mode {
        let io = DfuCoreIo::new(iface.clone(), info.interface_number, info.descriptor)?;
        let dfu = DfuAsync::new(io);
        dfu.detach().await?;
        if !dfu.will_detach() {
            dfu.usb_reset().await?;
        }
        let polls = info.descriptor.detach_timeout as u128 / REENUMERATE_POLL.as_millis() + 1;
        let mut found = false;
        for _ in 0..polls {
            iface.sleep(REENUMERATE_POLL).await;
            info = read_dfu_info(iface).await?;
            if info.dfu_mode {
                found = true;
                break;
            }
        }
        if !found {
            return Err(UpdateError::NeverInDfuMode);
        }
    }
    let io = DfuCoreIo::new(iface.clone(), info.interface_number, info.descriptor)?;
    let stayed = DfuAsync::new(io).download_from_slice(image).await?;
    Ok(Report {
        stayed_on_bus: stayed.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tolerant spec's DFU-mode configuration descriptor.
    const CONFIG: [u8; 27] = [
        0x09, 0x02, 0x1b, 0x00, 0x01, 0x01, 0x00, 0x80, 0x32, 0x09, 0x04, 0x00, 0x00, 0x00, 0xfe,
        0x01, 0x02, 0x05, 0x09, 0x21, 0x0f, 0xe8, 0x03, 0x00, 0x08, 0x10, 0x01,
    ];

    #[test]
    fn the_dfu_interface_and_its_functional_descriptor_are_found() {
        let info = parse_dfu_info(&CONFIG).unwrap();
        assert_eq!(info.interface_number, 0);
        assert!(info.dfu_mode);
        assert!(info.descriptor.manifestation_tolerant && info.descriptor.will_detach);
        assert_eq!(info.descriptor.transfer_size, 2048);
        assert_eq!(info.descriptor.dfu_version, (1, 0x10));
    }

    #[test]
    fn a_truncated_or_foreign_configuration_is_an_error_naming_the_byte() {
        let e = parse_dfu_info(&CONFIG[..20]).unwrap_err().to_string();
        assert!(e.contains("byte 18"), "{e}");
        let mut other = CONFIG;
        other[14] = 0xff;
        let e = parse_dfu_info(&other).unwrap_err().to_string();
        assert!(e.contains("class 0xfe"), "{e}");
    }
}
