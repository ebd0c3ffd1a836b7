//! Finding the DFU interface in the bytes a device returns for GET_DESCRIPTOR: the device
//! descriptor, then the whole configuration (interface class 0xFE, subclass 0x01, protocol 1 in
//! run-time mode or 2 in DFU mode) and the 9-byte DFU functional descriptor (type 0x21) after it.
//!
//! Pure parsing: no I/O, every length checked, malformed input is an error, never a panic.

/// `bDescriptorType` of the DFU functional descriptor.
pub const DFU_FUNCTIONAL: u8 = 0x21;

/// Which interface protocol the device shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// bInterfaceProtocol 1: the application runs; DFU_DETACH enters DFU mode.
    Runtime,
    /// bInterfaceProtocol 2: the bootloader runs; downloads and uploads are possible.
    Dfu,
}

/// The DFU functional descriptor, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Functional {
    /// bmAttributes.
    pub attributes: u8,
    /// wDetachTimeOut, milliseconds.
    pub detach_timeout_ms: u16,
    /// wTransferSize, bytes per DNLOAD/UPLOAD.
    pub transfer_size: u16,
    /// bcdDFUVersion.
    pub dfu_version: u16,
}

impl Functional {
    /// bitCanDnload.
    pub fn can_dnload(&self) -> bool {
        self.attributes & 1 != 0
    }
    /// bitCanUpload.
    pub fn can_upload(&self) -> bool {
        self.attributes & 2 != 0
    }
    /// bitManifestationTolerant.
    pub fn manifestation_tolerant(&self) -> bool {
        self.attributes & 4 != 0
    }
    /// bitWillDetach.
    pub fn will_detach(&self) -> bool {
        self.attributes & 8 != 0
    }

    /// Decodes the 9 bytes.
    pub fn parse(d: &[u8]) -> Result<Functional, String> {
        if d.len() != 9 || d[0] != 9 || d[1] != DFU_FUNCTIONAL {
            return Err(format!(
                "a DFU functional descriptor is 9 bytes of type 0x21, found {d:02x?}"
            ));
        }
        let f = Functional {
            attributes: d[2],
            detach_timeout_ms: u16::from_le_bytes([d[3], d[4]]),
            transfer_size: u16::from_le_bytes([d[5], d[6]]),
            dfu_version: u16::from_le_bytes([d[7], d[8]]),
        };
        if f.transfer_size == 0 {
            return Err("wTransferSize is 0".into());
        }
        Ok(f)
    }
}

/// The DFU interface of a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DfuInterface {
    /// bInterfaceNumber (the `wIndex` of every DFU request).
    pub number: u8,
    /// bAlternateSetting.
    pub alternate: u8,
    /// Run-time or DFU mode.
    pub mode: Mode,
    /// Its functional descriptor.
    pub functional: Functional,
}

/// idVendor, idProduct and bNumConfigurations of an 18-byte device descriptor.
pub fn parse_device(d: &[u8]) -> Result<(u16, u16, u8), String> {
    if d.len() != 18 || d[0] != 18 || d[1] != 1 {
        return Err(format!(
            "a device descriptor is 18 bytes of type 1, found {} bytes starting {:02x?}",
            d.len(),
            &d[..d.len().min(2)]
        ));
    }
    Ok((
        u16::from_le_bytes([d[8], d[9]]),
        u16::from_le_bytes([d[10], d[11]]),
        d[17],
    ))
}

/// wTotalLength of a configuration descriptor's 9-byte header.
pub fn total_length(header: &[u8]) -> Result<u16, String> {
    if header.len() < 9 || header[0] != 9 || header[1] != 2 {
        return Err(format!(
            "a configuration descriptor starts with 9 bytes of type 2, found {:02x?}",
            &header[..header.len().min(9)]
        ));
    }
    let total = u16::from_le_bytes([header[2], header[3]]);
    if total < 9 {
        return Err(format!("wTotalLength {total} is shorter than the header"));
    }
    Ok(total)
}

/// The first DFU interface (alternate setting 0 preferred) of a whole configuration, with the
/// functional descriptor that follows it.
pub fn find_dfu_interface(config: &[u8]) -> Result<DfuInterface, String> {
    let total = total_length(config)? as usize;
    if total != config.len() {
        return Err(format!(
            "wTotalLength says {total} bytes, {} arrived",
            config.len()
        ));
    }
    let mut at = 9;
    let mut current: Option<(u8, u8, Mode)> = None;
    let mut found = None;
    while at < config.len() {
        let len = config[at] as usize;
        if len < 2 || at + len > config.len() {
            return Err(format!(
                "descriptor at byte {at} has bLength {len}, past the end"
            ));
        }
        let d = &config[at..at + len];
        match d[1] {
            4 if len >= 9 => {
                current = match (d[5], d[6], d[7]) {
                    (0xfe, 0x01, 0x01) => Some((d[2], d[3], Mode::Runtime)),
                    (0xfe, 0x01, 0x02) => Some((d[2], d[3], Mode::Dfu)),
                    _ => None,
                };
            }
            DFU_FUNCTIONAL => {
                if let Some((number, alternate, mode)) = current.take() {
                    let functional = Functional::parse(d)?;
                    let iface = DfuInterface {
                        number,
                        alternate,
                        mode,
                        functional,
                    };
                    if alternate == 0 {
                        return Ok(iface);
                    }
                    found.get_or_insert(iface);
                }
            }
            _ => {}
        }
        at += len;
    }
    found.ok_or_else(|| {
        "no interface of class FE subclass 01 with a DFU functional descriptor".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_dfu_interface_and_rejects_garbage() {
        let cfg = [
            9, 2, 27, 0, 1, 1, 0, 0x80, 0x32, 9, 4, 0, 0, 0, 0xfe, 1, 2, 5, 9, 0x21, 0x0f, 0xe8, 3,
            0, 8, 0x10, 1,
        ];
        let i = find_dfu_interface(&cfg).unwrap();
        assert_eq!(i.mode, Mode::Dfu);
        assert_eq!(i.functional.transfer_size, 2048);
        assert!(i.functional.will_detach() && i.functional.manifestation_tolerant());
        assert!(find_dfu_interface(&cfg[..20]).is_err());
        let mut bad = cfg;
        bad[0] = 0xf6;
        assert!(find_dfu_interface(&bad).is_err());
        let mut bad = cfg;
        bad[18] = 0;
        assert!(find_dfu_interface(&bad).is_err());
        assert!(parse_device(&[18, 1]).is_err());
    }
}
