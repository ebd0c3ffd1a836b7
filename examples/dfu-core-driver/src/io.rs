//! [`DfuCoreIo`]: dfu-core's [`DfuAsyncIo`] over a [`UsbInterface`], the glue a user writes to
//! drive the published library against a simulated (or any) device.
//!
//! dfu-core demands that every future its IO returns be `Send`; the simulator's interface is
//! not (it holds an `Rc` to its world, and stays on the simulation's thread). Each future is
//! therefore wrapped in [`calametra::SimSend`], which the framework checks at run time: no
//! `unsafe` here (the crate forbids it). Nothing in this module reads the wall clock: time
//! passes through [`UsbInterface::sleep`].

use calametra::SimSend;
use calametra_usb::{ControlIn, ControlOut, TransferError, UsbInterface};
use dfu_core::asynchronous::DfuAsyncIo;
use dfu_core::functional_descriptor::FunctionalDescriptor;
use dfu_core::memory_layout::MemoryLayout;
use dfu_core::DfuProtocol;
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// The timeout of every control transfer dfu-core asks for (dfu-core passes none).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(1);

/// Why an IO call (or dfu-core, through it) failed.
#[derive(Debug)]
pub enum DfuIoError {
    /// The transfer failed on the bus.
    Transfer(TransferError),
    /// dfu-core refused what the device said (a state it did not expect, a short status).
    Dfu(dfu_core::Error),
    /// dfu-core's reader failed (never, reading a slice).
    Io(std::io::Error),
    /// dfu-core passed a `bmRequestType` with a reserved field.
    RequestType(String),
}

impl fmt::Display for DfuIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DfuIoError::Transfer(e) => write!(f, "transfer failed: {e}"),
            DfuIoError::Dfu(e) => write!(f, "dfu-core: {e}"),
            DfuIoError::Io(e) => write!(f, "reading the image: {e}"),
            DfuIoError::RequestType(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for DfuIoError {}

impl From<TransferError> for DfuIoError {
    fn from(e: TransferError) -> Self {
        DfuIoError::Transfer(e)
    }
}

impl From<dfu_core::Error> for DfuIoError {
    fn from(e: dfu_core::Error) -> Self {
        DfuIoError::Dfu(e)
    }
}

impl From<std::io::Error> for DfuIoError {
    fn from(e: std::io::Error) -> Self {
        DfuIoError::Io(e)
    }
}

/// dfu-core's IO over a claimed DFU interface: control transfers to interface
/// `interface_number` (dfu-core passes no `wIndex`), the device's functional descriptor and
/// protocol (DFU 1.1) as read from its configuration descriptor.
pub struct DfuCoreIo<I> {
    iface: I,
    interface_number: u16,
    descriptor: FunctionalDescriptor,
    protocol: DfuProtocol<MemoryLayout>,
}

impl<I: UsbInterface> DfuCoreIo<I> {
    /// The IO for interface `interface_number` of a device whose DFU functional descriptor is
    /// `descriptor`; DFU 1.1 only (DfuSe's `bcdDFUVersion` 0x011a needs its interface string,
    /// and the model is not DfuSe).
    pub fn new(
        iface: I,
        interface_number: u8,
        descriptor: FunctionalDescriptor,
    ) -> Result<Self, DfuIoError> {
        let protocol = DfuProtocol::new("", descriptor.dfu_version)?;
        Ok(DfuCoreIo {
            iface,
            interface_number: interface_number as u16,
            descriptor,
            protocol,
        })
    }

    /// The interface it talks through.
    pub fn interface(&self) -> &I {
        &self.iface
    }
}

impl<I: UsbInterface> DfuAsyncIo for DfuCoreIo<I> {
    type Read = usize;
    type Write = usize;
    type Reset = ();
    type Error = DfuIoError;
    type MemoryLayout = MemoryLayout;

    fn read_control(
        &self,
        request_type: u8,
        request: u8,
        value: u16,
        buffer: &mut [u8],
    ) -> impl Future<Output = Result<usize, DfuIoError>> + Send {
        SimSend::new(async move {
            // The call says the direction: dfu-core leaves bit 7 clear on its reads (DFU_GETSTATUS
            // comes as 0x21, not 0xa1), as libusb-based IO layers expect, which set it themselves.
            let req = ControlIn::from_request_type(
                request_type | 0x80,
                request,
                value,
                self.interface_number,
                buffer.len().min(u16::MAX as usize) as u16,
            )
            .map_err(DfuIoError::RequestType)?;
            let data = self.iface.control_in(req, CONTROL_TIMEOUT).await?;
            let n = data.len().min(buffer.len());
            buffer[..n].copy_from_slice(&data[..n]);
            Ok(n)
        })
    }

    fn write_control(
        &self,
        request_type: u8,
        request: u8,
        value: u16,
        buffer: &[u8],
    ) -> impl Future<Output = Result<usize, DfuIoError>> + Send {
        SimSend::new(async move {
            let req = ControlOut::from_request_type(
                request_type & 0x7f,
                request,
                value,
                self.interface_number,
                buffer,
            )
            .map_err(DfuIoError::RequestType)?;
            Ok(self.iface.control_out_len(req, CONTROL_TIMEOUT).await?)
        })
    }

    fn usb_reset(self) -> impl Future<Output = Result<(), DfuIoError>> + Send {
        SimSend::new(async move { Ok(self.iface.reset().await?) })
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        SimSend::new(self.iface.sleep(duration))
    }

    fn protocol(&self) -> &DfuProtocol<MemoryLayout> {
        &self.protocol
    }

    fn functional_descriptor(&self) -> &FunctionalDescriptor {
        &self.descriptor
    }
}
