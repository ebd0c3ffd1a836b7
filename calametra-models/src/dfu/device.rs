//! The DFU 1.1 device: the state machine of the spec's Appendix A.2 (as transcribed in
//! `refdata/dfu11.md`), driven by class requests, its own timers (bwPollTimeout, the detach
//! timer, a WillDetach re-enumeration), USB reset and power-on reset.
//!
//! Every state change goes through [`DevCtx::transition`] (machine `dfu`), so a fault can refuse
//! it: the device then keeps its state and the request stalls. Every change is also appended to
//! the model's history, which the `state_machine_legal` invariant checks against its own copy of
//! the spec's table. Chapter 9 requests live in `standard`; the flash in `flash`.

use super::flash::{Flash, ValidImage};
use super::spec::{Attributes, DescriptorSet, DfuSpec};
use super::state::{Cause, Request, State, Status, Transition};
use calametra_core::spec::Spec;
use calametra_core::usb::{ControlType, DevCtx, Device, Recipient, Reply, Setup};
use calametra_core::Error;

calametra_core::names! {
    /// Names of the coverage marks the model records with `DevCtx::mark`.
    pub mod marks {
        /// DFU_DETACH accepted in appIDLE.
        DETACH = "Detach";
        /// A WillDetach device re-enumerated in DFU mode after DFU_DETACH.
        WILL_DETACH_TO_DFU = "WillDetachToDfu";
        /// A USB reset in appDETACH took the device to DFU mode.
        DETACH_RESET = "DetachReset";
        /// The detach timer ran out; back to appIDLE.
        DETACH_TIMEOUT = "DetachTimeout";
        /// The first block of a download was accepted.
        DOWNLOAD_START = "DownloadStart";
        /// DFU_DNLOAD arrived while the device was busy in dfuDNBUSY.
        DNLOAD_DURING_DNBUSY = "DnloadDuringDnbusy";
        /// DFU_GETSTATUS arrived before the bwPollTimeout of dfuDNBUSY had passed.
        GETSTATUS_DURING_DNBUSY = "GetstatusDuringDnbusy";
        /// Another request arrived in dfuDNBUSY.
        REQUEST_DURING_DNBUSY = "RequestDuringDnbusy";
        /// A DFU_DNLOAD whose wBlockNum was not the next in sequence.
        BLOCK_OUT_OF_SEQUENCE = "BlockOutOfSequence";
        /// A block that does not fit the staging bank.
        FLASH_FULL = "FlashFull";
        /// A DFU_DNLOAD whose data stage did not carry wLength bytes, or more than wTransferSize.
        BAD_BLOCK_LENGTH = "BadBlockLength";
        /// The end of the image arrived and the device agreed it was complete.
        END_OF_IMAGE = "EndOfImage";
        /// The end of the image arrived but the image failed the completeness check.
        MANIFEST_REFUSED = "ManifestRefused";
        /// Manifestation finished: a new image is valid.
        MANIFESTED = "Manifested";
        /// A request arrived during dfuMANIFEST, aborting manifestation.
        REQUEST_DURING_MANIFEST = "RequestDuringManifest";
        /// A non-tolerant device reached dfuMANIFEST-WAIT-RESET.
        MANIFEST_WAIT_RESET = "ManifestWaitReset";
        /// A request arrived in dfuMANIFEST-WAIT-RESET (ignored with a stall).
        REQUEST_DURING_WAIT_RESET = "RequestDuringWaitReset";
        /// A WillDetach device left dfuMANIFEST-WAIT-RESET by itself for the new firmware.
        WILL_DETACH_TO_APP = "WillDetachToApp";
        /// A USB reset in dfuMANIFEST-WAIT-RESET started the new firmware.
        RESET_AFTER_MANIFEST = "ResetAfterManifest";
        /// An upload ended on a short frame.
        UPLOAD_SHORT_FRAME = "UploadShortFrame";
        /// DFU_ABORT ended a download.
        ABORT_DOWNLOAD = "AbortDownload";
        /// DFU_ABORT ended an upload.
        ABORT_UPLOAD = "AbortUpload";
        /// The device stalled a request and entered dfuERROR.
        STALL_TO_ERROR = "StallToError";
        /// DFU_CLRSTATUS cleared dfuERROR.
        ERROR_CLEARED = "ErrorCleared";
        /// A state change was refused by a fault at its transition site.
        TRANSITION_REFUSED = "TransitionRefused";
        /// A USB reset in a DFU-mode state.
        RESET_IN_DFU_MODE = "ResetInDfuMode";
        /// Power came back after the device was unplugged.
        POWER_ON_RESET = "PowerOnReset";
        /// The device lost power in the middle of a download.
        POWER_LOSS_DURING_DOWNLOAD = "PowerLossDuringDownload";
        /// The device lost power during manifestation.
        POWER_LOSS_DURING_MANIFEST = "PowerLossDuringManifest";
    }
}

/// A narrow test-only lie, used by the sabotage tests of the invariants. Never set it otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// Blocks are programmed over the running image, so a partial download is what the device
    /// would boot (`never_bricked` must catch it).
    InPlaceWrite,
    /// DFU_GETSTATUS during dfuDNBUSY is answered as if the block were done, moving to
    /// dfuDNLOAD-IDLE, as U-Boot does; the DFU 1.1 table says stall and dfuERROR
    /// (`state_machine_legal` must catch it).
    LenientDnbusy,
    /// Manifestation reports success but never makes the new image the running one (a
    /// bootloader that forgets to flip its bank flag); `installed_as_claimed` must catch a host
    /// that trusts it.
    SkipCommit,
    /// A timer whose transition a fault refused is dropped, not armed again: the device stays
    /// in dfuDNBUSY (or dfuMANIFEST, appDETACH) for good, as the model once did. The test of
    /// the fix shows a download then never finishes.
    StuckOnRefusedTimer,
}

/// The device's own timers. A token is `generation << 2 | kind`; only the last armed one counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    BlockWritten = 0,
    ManifestDone = 1,
    DetachTimeout = 2,
    SelfDetach = 3,
}

const MS: u64 = 1_000_000;

/// A USB DFU 1.1 device built from a `calametra.spec.dfu` spec.
///
/// It powers up in run-time mode (appIDLE) running the spec's factory image (or in DFU mode,
/// when the spec says `start: "dfu_idle"` or there is no valid image), shows the run-time or
/// DFU-mode descriptors accordingly, and follows the DFU 1.1 table for every class request.
/// Where the table leaves room, it decides as follows (and the conformance test pins it):
///
/// - DFU_DETACH arms the detach timer (`min(wTimeout, wDetachTimeOut)`); with bitWillDetach it
///   instead re-enumerates in DFU mode after `reenumerate_ms`, staying on the bus meanwhile
///   (the simulator cannot re-attach a device by itself). A USB reset in appDETACH enters DFU
///   mode at once.
/// - A block is programmed when dfuDNBUSY's bwPollTimeout (`poll_timeout_ms.dnbusy`) ends; any
///   request before that, DFU_GETSTATUS included, stalls and enters dfuERROR. A bwPollTimeout
///   of 0 programs it on the DFU_GETSTATUS instead, skipping dfuDNBUSY.
/// - Blocks must follow each other in `wBlockNum` (the first may have any number), carry
///   exactly `wLength <= wTransferSize` bytes and fit the staging bank, else stall with
///   errADDRESS or errSTALLEDPKT. The end of the image is checked (`flash.image_check`): a
///   refused image stalls with errNOTDONE or errFILE.
/// - Manifestation starts with the DFU_GETSTATUS in dfuMANIFEST-SYNC and takes
///   `poll_timeout_ms.manifest`; only then does the new image become the valid one. A request
///   during dfuMANIFEST stalls and enters dfuERROR, abandoning it (the old image stays).
/// - dfuMANIFEST-WAIT-RESET stalls every request and stays; a USB reset (or, with
///   bitWillDetach, its own re-enumeration) starts the new image in appIDLE.
/// - DFU_UPLOAD returns the valid image from its start, in order; a frame shorter than
///   `wLength` ends the upload (back to dfuIDLE). An UPLOAD with `wLength` 0 stalls.
/// - A USB reset in DFU mode runs the valid image (appIDLE), or stays in dfuERROR with
///   errFIRMWARE when there is none. Unplugging cuts the power: whatever was in progress is
///   lost, and plugging back in is a power-on reset.
///
/// A scenario issues a USB reset through the world, for example as an external event:
/// `sim.external("bus_reset", move |w| w.with_model(dev, |d, cx| d.on_reset(cx)))`.
pub struct Dfu {
    pub(super) spec: DfuSpec,
    state: State,
    status: Status,
    poll_ms: u32,
    flash: Flash,
    /// The block received in dfuDNLOAD-SYNC, programmed when dfuDNBUSY ends.
    pending: Vec<u8>,
    block_done: bool,
    manifest_done: bool,
    next_block: u16,
    upload_offset: usize,
    timer_generation: u64,
    armed: Option<u64>,
    powered: bool,
    pub(super) address: u8,
    pub(super) configuration: u8,
    history: Vec<Transition>,
    /// A test-only lie (see [`Sabotage`]); `None` in every real use.
    #[doc(hidden)]
    pub sabotage: Option<Sabotage>,
}

impl Dfu {
    /// Builds the model from a DFU spec; errors name the spec file and the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Dfu, Error> {
        Ok(Dfu::from_dfu_spec(DfuSpec::parse(spec)?))
    }

    /// Builds the model from a DFU spec.
    ///
    /// # Panics
    ///
    /// When the spec is malformed, with the message of [`Dfu::try_from_spec`]'s error (the file
    /// and the field). Scenarios whose spec is embedded at compile time use this.
    pub fn from_spec(spec: &Spec) -> Dfu {
        match Dfu::try_from_spec(spec) {
            Ok(d) => d,
            Err(e) => panic!("calametra: invalid DFU spec: {e}"),
        }
    }

    /// Builds the model from already checked facts.
    pub fn from_dfu_spec(spec: DfuSpec) -> Dfu {
        let flash = Flash::new(spec.flash_size, spec.image_check, &spec.factory_image);
        let mut d = Dfu {
            spec,
            state: State::AppIdle,
            status: Status::Ok,
            poll_ms: 0,
            flash,
            pending: Vec::new(),
            block_done: false,
            manifest_done: false,
            next_block: 0,
            upload_offset: 0,
            timer_generation: 0,
            armed: None,
            powered: true,
            address: 0,
            configuration: 0,
            history: Vec::new(),
            sabotage: None,
        };
        let (state, status) = d.boot_state();
        d.state = state;
        d.status = status;
        d
    }

    /// The checked spec facts.
    pub fn dfu_spec(&self) -> &DfuSpec {
        &self.spec
    }

    /// The current state (ground truth).
    pub fn state(&self) -> State {
        self.state
    }

    /// The current `bStatus`.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The functional descriptor's attributes.
    pub fn attributes(&self) -> Attributes {
        self.spec.attributes
    }

    /// The image the device would run after a reset, if it has a valid one.
    pub fn valid_image(&self) -> Option<&[u8]> {
        self.flash.valid_image()
    }

    /// The bytes the current download has programmed into the staging bank.
    pub fn staged_image(&self) -> &[u8] {
        self.flash.staged()
    }

    /// Every image that was ever marked valid, oldest first (the factory image at time 0).
    pub fn image_history(&self) -> &[ValidImage] {
        self.flash.history()
    }

    /// The flash banks.
    pub fn flash(&self) -> &Flash {
        &self.flash
    }

    /// Every state change so far, in order.
    pub fn history(&self) -> &[Transition] {
        &self.history
    }

    /// The bwPollTimeout the device last reported, in milliseconds.
    pub fn poll_timeout_ms(&self) -> u32 {
        self.poll_ms
    }

    /// Whether the device shows its DFU-mode descriptors.
    pub fn in_dfu_mode(&self) -> bool {
        !self.state.is_runtime()
    }

    /// Whether the device has power (it loses it when unplugged, until a reconnect).
    pub fn powered(&self) -> bool {
        self.powered
    }

    /// The USB address the host gave it (0 before SET_ADDRESS and after a reset).
    pub fn address(&self) -> u8 {
        self.address
    }

    /// The current descriptor set: run-time or DFU mode.
    pub fn descriptors(&self) -> &DescriptorSet {
        if self.state.is_runtime() {
            &self.spec.runtime
        } else {
            &self.spec.dfu_mode
        }
    }

    /// The state and status the device boots into.
    fn boot_state(&self) -> (State, Status) {
        if self.spec.starts_in_dfu_mode {
            (State::DfuIdle, Status::Ok)
        } else if self.flash.valid_image().is_some() {
            (State::AppIdle, Status::Ok)
        } else {
            (State::Error, Status::ErrFirmware)
        }
    }

    /// Changes state through the transition site; `false` (nothing changed) when a fault
    /// refuses it. Leaving for dfuIDLE or dfuERROR drops any download or upload in progress.
    fn go(&mut self, cx: &mut DevCtx<'_>, to: State, cause: Cause, status: Status) -> bool {
        let from = self.state;
        if from != to && !cx.transition("dfu", from.name(), to.name()) {
            cx.mark(marks::TRANSITION_REFUSED);
            return false;
        }
        self.state = to;
        self.status = status;
        self.armed = None;
        if matches!(to, State::DfuIdle | State::Error | State::AppIdle) {
            self.pending.clear();
            self.flash.discard();
            self.upload_offset = 0;
            self.block_done = false;
            self.manifest_done = false;
        }
        if from != to {
            self.history.push(Transition {
                at_ns: cx.now(),
                from,
                to,
                cause,
                status,
                firmware_valid: self.flash.valid_image().is_some(),
            });
        }
        true
    }

    /// Stalls the request and enters dfuERROR with `status` (DFU 1.1: a stall in DFU mode).
    fn stall_to_error(&mut self, cx: &mut DevCtx<'_>, cause: Cause, status: Status) -> Reply {
        if self.go(cx, State::Error, cause, status) {
            cx.mark(marks::STALL_TO_ERROR);
        }
        Reply::Stall
    }

    fn arm(&mut self, cx: &mut DevCtx<'_>, timer: Timer, ms: u64) {
        self.timer_generation += 1;
        let token = self.timer_generation << 2 | timer as u64;
        self.armed = Some(token);
        cx.wake_after(ms.saturating_mul(MS), token);
    }

    /// The 6-byte DFU_GETSTATUS answer for the current state.
    fn status_bytes(&mut self) -> Vec<u8> {
        self.poll_ms = match self.state {
            State::DnBusy => self.spec.dnbusy_poll_ms,
            State::Manifest => self.spec.manifest_poll_ms,
            _ => 0,
        };
        let p = self.poll_ms.to_le_bytes();
        vec![self.status.code(), p[0], p[1], p[2], self.state.code(), 0]
    }

    fn program_pending(&mut self, cx: &mut DevCtx<'_>) {
        let block = std::mem::take(&mut self.pending);
        // The block was checked against the bank's room when it arrived.
        let _ = self.flash.program(&block);
        self.block_done = true;
        if self.sabotage == Some(Sabotage::InPlaceWrite) {
            self.flash.sabotage_in_place(cx.now());
        }
    }

    /// A DFU_DNLOAD with data, in dfuIDLE (`first`) or dfuDNLOAD-IDLE.
    fn accept_block(
        &mut self,
        cx: &mut DevCtx<'_>,
        setup: &Setup,
        data: &[u8],
        cause: Cause,
        first: bool,
    ) -> Reply {
        let len = setup.length as usize;
        if len > self.spec.transfer_size as usize || data.len() != len {
            cx.mark(marks::BAD_BLOCK_LENGTH);
            return self.stall_to_error(cx, cause, Status::ErrStalledPkt);
        }
        if !first && setup.value != self.next_block {
            cx.mark(marks::BLOCK_OUT_OF_SEQUENCE);
            return self.stall_to_error(cx, cause, Status::ErrAddress);
        }
        let fits = if first {
            len <= self.flash.size()
        } else {
            self.flash.fits(len)
        };
        if !fits {
            cx.mark(marks::FLASH_FULL);
            return self.stall_to_error(cx, cause, Status::ErrAddress);
        }
        if !self.go(cx, State::DnloadSync, cause, Status::Ok) {
            return Reply::Stall;
        }
        if first {
            self.flash.begin();
            cx.mark(marks::DOWNLOAD_START);
        }
        self.pending = data.to_vec();
        self.block_done = false;
        self.next_block = setup.value.wrapping_add(1);
        Reply::Ack
    }

    /// A DFU_UPLOAD with `wLength > 0` in dfuIDLE or dfuUPLOAD-IDLE.
    fn upload(&mut self, cx: &mut DevCtx<'_>, setup: &Setup) -> Reply {
        let len = setup.length as usize;
        let frame = self.flash.read(self.upload_offset, len).to_vec();
        let cause = Cause::Upload {
            length: setup.length,
            returned: frame.len() as u16,
        };
        let short = frame.len() < len;
        let to = if short {
            State::DfuIdle
        } else {
            State::UploadIdle
        };
        if !self.go(cx, to, cause, Status::Ok) {
            return Reply::Stall;
        }
        if short {
            cx.mark(marks::UPLOAD_SHORT_FRAME);
            self.upload_offset = 0;
        } else {
            self.upload_offset += frame.len();
        }
        Reply::Data(frame)
    }

    /// A DFU class request to the DFU interface.
    fn class(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let req = Request::decode(setup.request, setup.is_in());
        let cause = Cause::Request {
            request: req,
            length: setup.length,
        };
        let attrs = self.spec.attributes;
        match (self.state, req) {
            // Status queries answer without a change wherever the device is not busy.
            (
                State::AppIdle
                | State::AppDetach
                | State::DfuIdle
                | State::DnloadIdle
                | State::UploadIdle
                | State::Error,
                Request::GetStatus,
            ) => Reply::Data(self.status_bytes()),
            (s, Request::GetState)
                if !matches!(
                    s,
                    State::DnBusy | State::Manifest | State::ManifestWaitReset
                ) =>
            {
                Reply::Data(vec![s.code()])
            }

            (State::AppIdle, Request::Detach) => {
                if !self.go(cx, State::AppDetach, cause, Status::Ok) {
                    return Reply::Stall;
                }
                cx.mark(marks::DETACH);
                if attrs.will_detach {
                    let ms = self.spec.reenumerate_ms as u64;
                    self.arm(cx, Timer::SelfDetach, ms);
                } else {
                    let ms = setup.value.min(self.spec.detach_timeout_ms) as u64;
                    self.arm(cx, Timer::DetachTimeout, ms);
                }
                Reply::Ack
            }
            (State::AppIdle, _) => Reply::Stall,
            (State::AppDetach, _) => {
                self.go(cx, State::AppIdle, cause, Status::Ok);
                Reply::Stall
            }

            (State::DfuIdle, Request::Dnload) if attrs.can_dnload && setup.length > 0 => {
                self.accept_block(cx, setup, data, cause, true)
            }
            (State::DfuIdle, Request::Upload) if attrs.can_upload && setup.length > 0 => {
                self.upload(cx, setup)
            }
            (State::DfuIdle, Request::Abort) => Reply::Ack,
            (State::DfuIdle, _) => self.stall_to_error(cx, cause, Status::ErrStalledPkt),

            (State::DnloadSync, Request::GetStatus) => {
                if self.block_done {
                    if !self.go(cx, State::DnloadIdle, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                } else if self.spec.dnbusy_poll_ms == 0 {
                    if !self.go(cx, State::DnloadIdle, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                    self.program_pending(cx);
                } else {
                    if !self.go(cx, State::DnBusy, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                    let ms = self.spec.dnbusy_poll_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::BlockWritten, ms.max(1));
                }
                Reply::Data(self.status_bytes())
            }
            (State::DnloadSync, _) => self.stall_to_error(cx, cause, Status::ErrStalledPkt),

            (State::DnBusy, Request::GetStatus)
                if self.sabotage == Some(Sabotage::LenientDnbusy) =>
            {
                if !self.go(cx, State::DnloadIdle, cause, Status::Ok) {
                    return Reply::Stall;
                }
                self.program_pending(cx);
                Reply::Data(self.status_bytes())
            }
            (State::DnBusy, r) => {
                cx.mark(match r {
                    Request::Dnload => marks::DNLOAD_DURING_DNBUSY,
                    Request::GetStatus => marks::GETSTATUS_DURING_DNBUSY,
                    _ => marks::REQUEST_DURING_DNBUSY,
                });
                self.stall_to_error(cx, cause, Status::ErrStalledPkt)
            }

            (State::DnloadIdle, Request::Dnload) if setup.length > 0 => {
                self.accept_block(cx, setup, data, cause, false)
            }
            (State::DnloadIdle, Request::Dnload) => match self.flash.check_staged() {
                Ok(()) => {
                    if !self.go(cx, State::ManifestSync, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                    cx.mark(marks::END_OF_IMAGE);
                    self.manifest_done = false;
                    Reply::Ack
                }
                Err(status) => {
                    cx.mark(marks::MANIFEST_REFUSED);
                    self.stall_to_error(cx, cause, status)
                }
            },
            (State::DnloadIdle, Request::Abort) => {
                if !self.go(cx, State::DfuIdle, cause, Status::Ok) {
                    return Reply::Stall;
                }
                cx.mark(marks::ABORT_DOWNLOAD);
                Reply::Ack
            }
            (State::DnloadIdle, _) => self.stall_to_error(cx, cause, Status::ErrStalledPkt),

            (State::ManifestSync, Request::GetStatus) => {
                if self.manifest_done {
                    // Only a tolerant device comes back here after manifesting.
                    if !self.go(cx, State::DfuIdle, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                } else {
                    if !self.go(cx, State::Manifest, cause, Status::Ok) {
                        return Reply::Stall;
                    }
                    let ms = self.spec.manifest_poll_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::ManifestDone, ms.max(1));
                }
                Reply::Data(self.status_bytes())
            }
            (State::ManifestSync, _) => self.stall_to_error(cx, cause, Status::ErrStalledPkt),

            (State::Manifest, _) => {
                cx.mark(marks::REQUEST_DURING_MANIFEST);
                self.stall_to_error(cx, cause, Status::ErrStalledPkt)
            }

            (State::ManifestWaitReset, _) => {
                cx.mark(marks::REQUEST_DURING_WAIT_RESET);
                Reply::Stall
            }

            (State::UploadIdle, Request::Upload) if setup.length > 0 => self.upload(cx, setup),
            (State::UploadIdle, Request::Abort) => {
                if !self.go(cx, State::DfuIdle, cause, Status::Ok) {
                    return Reply::Stall;
                }
                cx.mark(marks::ABORT_UPLOAD);
                Reply::Ack
            }
            (State::UploadIdle, _) => self.stall_to_error(cx, cause, Status::ErrStalledPkt),

            (State::Error, Request::ClrStatus) => {
                if !self.go(cx, State::DfuIdle, cause, Status::Ok) {
                    return Reply::Stall;
                }
                cx.mark(marks::ERROR_CLEARED);
                Reply::Ack
            }
            (State::Error, _) => Reply::Stall,
        }
    }

    /// The state a reset takes a DFU-mode device to: its firmware if it has a valid one,
    /// else dfuERROR with errFIRMWARE.
    fn after_reset(&self) -> (State, Status) {
        if self.flash.valid_image().is_some() {
            (State::AppIdle, Status::Ok)
        } else {
            (State::Error, Status::ErrFirmware)
        }
    }
}

impl Device for Dfu {
    fn name(&self) -> &str {
        "dfu"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.control_type(), setup.recipient()) {
            // The configuration has one interface, the DFU one (the spec checks bNumInterfaces
            // 1): a request to another is to an interface that does not exist, a Request Error
            // (USB 2.0 9.2.7, and 9.4.4, 9.4.5 and 9.4.10 for the standard ones), a stall the
            // spec itself settles, not a gap (a driver trusting a damaged bInterfaceNumber
            // meets it).
            (Some(ControlType::Standard | ControlType::Class), Recipient::Interface)
                if setup.index != self.spec.interface as u16 =>
            {
                Reply::Stall
            }
            (Some(ControlType::Standard), _) => self.standard(cx, setup),
            (Some(ControlType::Class), Recipient::Interface)
                if setup.index == self.spec.interface as u16 =>
            {
                self.class(cx, setup, data)
            }
            _ => {
                cx.model_gap(
                    &format!(
                        "control bmRequestType {:#04x} bRequest {:#04x} wIndex {}",
                        setup.request_type, setup.request, setup.index
                    ),
                    self.state.spec_name(),
                );
                Reply::Stall
            }
        }
    }

    // A guard with a state change in it would read worse than the nested `if`s.
    #[allow(clippy::collapsible_match)]
    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        if self.armed != Some(token) {
            return; // superseded: the state moved on since it was armed
        }
        self.armed = None;
        let tolerant = self.spec.attributes.manifestation_tolerant;
        // A fault that refuses a timer's transition delays the device's own event; it does not
        // cancel it: the timer is armed again for the same period, so the device moves on
        // later (a refused move left it in dfuDNBUSY or dfuMANIFEST for good).
        match (token & 3, self.state) {
            (0, State::DnBusy) => {
                if self.go(cx, State::DnloadSync, Cause::BlockWritten, Status::Ok) {
                    self.program_pending(cx);
                } else if self.sabotage != Some(Sabotage::StuckOnRefusedTimer) {
                    let ms = self.spec.dnbusy_poll_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::BlockWritten, ms.max(1));
                }
            }
            (1, State::Manifest) => {
                let to = if tolerant {
                    State::ManifestSync
                } else {
                    State::ManifestWaitReset
                };
                if self.go(cx, to, Cause::ManifestDone, Status::Ok) {
                    if self.sabotage == Some(Sabotage::SkipCommit) {
                        self.flash.discard();
                    } else {
                        self.flash.commit(cx.now());
                    }
                    self.manifest_done = true;
                    cx.mark(marks::MANIFESTED);
                    if !tolerant {
                        cx.mark(marks::MANIFEST_WAIT_RESET);
                        if self.spec.attributes.will_detach {
                            let ms = self.spec.reenumerate_ms as u64;
                            self.arm(cx, Timer::SelfDetach, ms);
                        }
                    }
                } else if self.sabotage != Some(Sabotage::StuckOnRefusedTimer) {
                    let ms = self.spec.manifest_poll_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::ManifestDone, ms.max(1));
                }
            }
            (2, State::AppDetach) => {
                if self.go(cx, State::AppIdle, Cause::DetachTimeout, Status::Ok) {
                    cx.mark(marks::DETACH_TIMEOUT);
                } else if self.sabotage != Some(Sabotage::StuckOnRefusedTimer) {
                    let ms = self.spec.detach_timeout_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::DetachTimeout, ms.max(1));
                }
            }
            (3, State::AppDetach) => {
                if self.go(cx, State::DfuIdle, Cause::SelfDetach, Status::Ok) {
                    self.address = 0;
                    self.configuration = 0;
                    cx.mark(marks::WILL_DETACH_TO_DFU);
                } else {
                    // The re-enumeration failed; the detach timer still brings it back.
                    let ms = self.spec.detach_timeout_ms as u64;
                    // At least a millisecond: a retry moves the clock.
                    self.arm(cx, Timer::DetachTimeout, ms.max(1));
                }
            }
            (3, State::ManifestWaitReset) => {
                let (to, status) = self.after_reset();
                if self.go(cx, to, Cause::SelfDetach, status) {
                    self.address = 0;
                    self.configuration = 0;
                    cx.mark(marks::WILL_DETACH_TO_APP);
                } else {
                    // The detach-attach failed; the device tries again.
                    let ms = self.spec.reenumerate_ms as u64;
                    self.arm(cx, Timer::SelfDetach, ms);
                }
            }
            _ => {}
        }
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.address = 0;
        self.configuration = 0;
        if !self.powered {
            self.powered = true;
            self.armed = None;
            self.pending.clear();
            self.flash.discard();
            cx.mark(marks::POWER_ON_RESET);
            let (to, status) = self.boot_state();
            // Refused by a fault: the device comes up where it was, with nothing in progress.
            self.go(cx, to, Cause::PowerOn, status);
            return;
        }
        match self.state {
            State::AppIdle => {}
            State::AppDetach => {
                if self.go(cx, State::DfuIdle, Cause::UsbReset, Status::Ok) {
                    cx.mark(marks::DETACH_RESET);
                }
            }
            State::ManifestWaitReset => {
                let (to, status) = self.after_reset();
                if self.go(cx, to, Cause::UsbReset, status) {
                    cx.mark(marks::RESET_AFTER_MANIFEST);
                }
            }
            _ => {
                cx.mark(marks::RESET_IN_DFU_MODE);
                let (to, status) = self.after_reset();
                if to == self.state {
                    self.status = status;
                } else {
                    self.go(cx, to, Cause::UsbReset, status);
                }
            }
        }
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.powered = false;
        self.armed = None;
        match self.state {
            State::DnloadSync | State::DnBusy | State::DnloadIdle | State::ManifestSync => {
                cx.mark(marks::POWER_LOSS_DURING_DOWNLOAD)
            }
            State::Manifest => cx.mark(marks::POWER_LOSS_DURING_MANIFEST),
            _ => {}
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        if setup.control_type() != Some(ControlType::Class)
            || setup.recipient() != Recipient::Interface
        {
            return None;
        }
        Request::decode(setup.request, setup.is_in()).site_name()
    }

    fn describe(&self) -> Vec<(String, String)> {
        let f = |k: &str, v: String| (k.to_string(), v);
        vec![
            f("state", self.state.spec_name().to_string()),
            f("status", self.status.spec_name().to_string()),
            f("powered", self.powered.to_string()),
            f("address", self.address.to_string()),
            f("configuration", self.configuration.to_string()),
            f("poll timeout", format!("{} ms", self.poll_ms)),
            f("next block", self.next_block.to_string()),
            f(
                "pending block",
                format!(
                    "{} bytes (programmed: {})",
                    self.pending.len(),
                    self.block_done
                ),
            ),
            f("manifested", self.manifest_done.to_string()),
            f("upload offset", self.upload_offset.to_string()),
            f(
                "timer armed",
                self.armed
                    .map_or("no".to_string(), |t| format!("token {t:#x}")),
            ),
            f(
                "staged image",
                format!("{} bytes", self.flash.staged().len()),
            ),
            f(
                "valid image",
                self.flash.valid_image().map_or("none".to_string(), |i| {
                    format!(
                        "{} bytes, crc32 {:08x}",
                        i.len(),
                        crate::dfu::flash::crc32(i)
                    )
                }),
            ),
            f("images committed", self.flash.history().len().to_string()),
            f("transitions", self.history.len().to_string()),
        ]
    }
}
