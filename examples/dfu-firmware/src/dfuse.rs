//! The DfuSe addressing a DFU 1.1 host needs for a device that reports bcdDFUVersion 0x011A,
//! as a [`UsbInterface`] wrapper around the host's interface.
//!
//! usbd-dfu implements ST's DfuSe 1.1a (AN3156) on top of DFU 1.1: DFU_DNLOAD and DFU_UPLOAD
//! with wBlockNum 0 are commands (set address pointer, erase, get commands), 1 is reserved, and
//! wBlockNum n >= 2 moves data at `address pointer + (n - 2) * wTransferSize`. A plain DFU 1.1
//! host counts blocks from 0, which such a device takes for commands. dfu-util switches to its
//! DfuSe code for these devices; this wrapper does the least of that for the example updater:
//! once the configuration descriptor shows bcdDFUVersion 0x011A, the wBlockNum of every
//! DFU_DNLOAD and DFU_UPLOAD is offset by 2 (the address pointer stays at the device's default,
//! the start of its flash). Everything else passes through unchanged, so against a DFU 1.1
//! device it is invisible. It is host code: the device sees exactly what a DfuSe host sends.

use calametra_core::usb::{
    ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface,
};
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

/// bcdDFUVersion of DfuSe 1.1a.
pub const DFUSE_VERSION: u16 = 0x011a;

const DNLOAD: u8 = 1;
const UPLOAD: u8 = 2;

/// A host interface that speaks DfuSe block numbers to DfuSe devices.
pub struct DfuSe<I> {
    inner: I,
    dfuse: Cell<bool>,
}

impl<I: UsbInterface> DfuSe<I> {
    /// Wraps a host interface.
    pub fn new(inner: I) -> Self {
        DfuSe {
            inner,
            dfuse: Cell::new(false),
        }
    }

    /// Whether the device turned out to be a DfuSe device.
    pub fn is_dfuse(&self) -> bool {
        self.dfuse.get()
    }

    fn learn(&self, config: &[u8]) {
        let mut at = 0;
        while at + 2 <= config.len() {
            let len = config[at] as usize;
            if len < 2 || at + len > config.len() {
                return;
            }
            if config[at + 1] == 0x21 && len >= 9 {
                let bcd = u16::from_le_bytes([config[at + 7], config[at + 8]]);
                self.dfuse.set(bcd == DFUSE_VERSION);
            }
            at += len;
        }
    }

    fn block(
        &self,
        control_type: ControlType,
        recipient: Recipient,
        request: u8,
        value: u16,
    ) -> u16 {
        let dfu_data = control_type == ControlType::Class
            && recipient == Recipient::Interface
            && (request == DNLOAD || request == UPLOAD);
        if dfu_data && self.dfuse.get() {
            value.wrapping_add(2)
        } else {
            value
        }
    }
}

impl<I: UsbInterface> UsbInterface for DfuSe<I> {
    fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        let config =
            req.control_type == ControlType::Standard && req.request == 6 && req.value >> 8 == 2;
        let req = ControlIn {
            value: self.block(req.control_type, req.recipient, req.request, req.value),
            ..req
        };
        async move {
            let r = self.inner.control_in(req, timeout).await;
            if let (true, Ok(bytes)) = (config, &r) {
                self.learn(bytes);
            }
            r
        }
    }

    fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>> {
        let value = self.block(req.control_type, req.recipient, req.request, req.value);
        self.inner.control_out(ControlOut { value, ..req }, timeout)
    }

    fn bulk_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        self.inner.bulk_out(ep, data)
    }

    fn bulk_in(&self, ep: u8, len: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        self.inner.bulk_in(ep, len)
    }

    fn interrupt_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        self.inner.interrupt_in(ep, len)
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        self.inner.sleep(d)
    }

    fn reset(&self) -> impl Future<Output = Result<(), TransferError>> {
        self.inner.reset()
    }
}
