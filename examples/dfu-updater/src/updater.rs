//! The update procedure: enter DFU mode, download the image in wTransferSize blocks honouring
//! bwPollTimeout, manifest it, and verify it by upload, recovering from errors along the way.
//!
//! Recovery is deliberately simple: any failure that leaves the device on the bus abandons the
//! attempt, brings the device back to dfuIDLE (DFU_CLRSTATUS from dfuERROR, DFU_ABORT from an
//! idle state, waiting out busy states) and starts the whole download again; a device that
//! left the bus ends the update with [`UpdateError::Disconnected`]. DFU 1.1 gives a host no way
//! to resume a download, and a restart is always correct because the device keeps its old image
//! until a complete new one is manifested.
//!
//! Time passes only through [`UsbInterface::sleep`], so the same code runs on the simulator's
//! virtual clock and on hardware.

use crate::descriptors::{find_dfu_interface, parse_device, total_length, DfuInterface, Mode};
use crate::protocol::{state, Client, ReqError};
use calametra_usb::UsbInterface;
use std::fmt;
use std::time::Duration;

/// Tuning of [`update`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Timeout of every control transfer.
    pub control_timeout: Duration,
    /// Whole attempts (enter DFU mode, download, manifest, verify) before giving up.
    pub attempts: u32,
    /// Uploads compared against the image per attempt before the image is downloaded again.
    pub verify_attempts: u32,
    /// How often to look at the descriptors while a WillDetach device detaches and
    /// re-attaches itself.
    pub reenumerate_poll: Duration,
    /// How long to wait before asking again when a DFU_GETSTATUS answer was lost or garbled
    /// (the device may have moved to a busy state whose bwPollTimeout we never saw).
    pub busy_fallback: Duration,
    /// The longest bwPollTimeout slept in full. A DFU_GETSTATUS garbled on the way can report
    /// hours (the field is 24 bits of milliseconds); past this the device is asked again, as
    /// after a lost answer, rather than the update stalling for as long as the garble says.
    pub max_poll_wait: Duration,
    /// Plant the bug exploration must find (see the crate docs). Defaults to whether the crate
    /// was built with feature `planted-bug`; scenarios may hold both variants side by side.
    pub planted_bug: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            control_timeout: Duration::from_secs(1),
            attempts: 8,
            verify_attempts: 4,
            reenumerate_poll: Duration::from_millis(25),
            busy_fallback: Duration::from_millis(100),
            max_poll_wait: Duration::from_secs(5),
            planted_bug: cfg!(feature = "planted-bug"),
        }
    }
}

/// What a successful update did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Attempts made (1 when nothing went wrong).
    pub attempts: u32,
    /// Blocks in the image.
    pub blocks: u32,
    /// wTransferSize used.
    pub transfer_size: u16,
    /// Whether the device is manifestation tolerant.
    pub manifestation_tolerant: bool,
    /// Whether an upload read the image back unchanged (false when the device cannot upload).
    pub verified: bool,
    /// Why earlier attempts were abandoned, in order.
    pub restarts: Vec<String>,
}

/// Why an update failed. In every case the device keeps a valid image (the old one, or the new
/// one when manifestation finished), because it only switches images after a complete download.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateError {
    /// There is nothing to download.
    EmptyImage,
    /// The device left the bus; nothing more can be done through this interface.
    Disconnected,
    /// The device left the bus where it re-enumerates by itself (a WillDetach device after
    /// DFU_DETACH, or a non-tolerant one after manifestation). On hardware this is the normal
    /// way out of run-time mode: open the device again and call [`update`] again.
    Reattached {
        /// Where in the update.
        stage: &'static str,
    },
    /// The device cannot do what the update needs (bitCanDnload is clear).
    Unsupported(&'static str),
    /// The device needs a USB reset from the host here (bitWillDetach is clear), and
    /// `UsbInterface` has no way to issue one.
    BusResetRequired {
        /// Where in the update.
        stage: &'static str,
    },
    /// Every attempt failed.
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// Why the last one failed.
        last: String,
    },
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::EmptyImage => f.write_str("the image is empty"),
            UpdateError::Disconnected => f.write_str("the device left the bus"),
            UpdateError::Reattached { stage } => write!(
                f,
                "the device re-enumerated {stage}; open it again and run the update again"
            ),
            UpdateError::Unsupported(what) => write!(f, "the device cannot update: {what}"),
            UpdateError::BusResetRequired { stage } => write!(
                f,
                "the device needs a USB reset {stage} (it does not detach itself), and this interface cannot issue one"
            ),
            UpdateError::GaveUp { attempts, last } => {
                write!(f, "gave up after {attempts} attempts; the last failed: {last}")
            }
        }
    }
}

impl std::error::Error for UpdateError {}

/// How an attempt ended early.
enum Fail {
    /// End the update.
    Fatal(UpdateError),
    /// Abandon this attempt and start again.
    Retry(String),
}

impl From<ReqError> for Fail {
    fn from(e: ReqError) -> Self {
        if e.is_disconnect() {
            Fail::Fatal(UpdateError::Disconnected)
        } else {
            Fail::Retry(e.to_string())
        }
    }
}

/// How manifestation ended.
enum Manifested {
    /// A tolerant device is back in dfuIDLE.
    Tolerant,
    /// A non-tolerant device waits for a reset (or detaches itself).
    WaitReset,
    /// The device stopped answering after the final block, which the planted bug reads as
    /// "it reset into the new firmware".
    AssumedByReset,
}

/// Updates the device behind `iface` to `image` and verifies it by upload.
///
/// Works from run-time mode (DFU_DETACH; the device must have bitWillDetach, see
/// [`UpdateError::BusResetRequired`]) or DFU mode, with tolerant and non-tolerant
/// manifestation. Returns after the uploaded image matched, or with an error that says why the
/// update could not finish; the device then still holds a valid image.
///
/// The device is left in dfuIDLE with the new image valid: a USB reset or a power cycle starts
/// it (a non-tolerant device already restarted into it once, and was detached again for the
/// verification). `UsbInterface` has no bus reset, so issuing one is the caller's business.
pub async fn update<I: UsbInterface>(
    iface: &I,
    image: &[u8],
    opts: &Options,
) -> Result<Report, UpdateError> {
    if image.is_empty() {
        return Err(UpdateError::EmptyImage);
    }
    let mut c = Client::new(iface, 0, opts.control_timeout);
    let mut report = Report::default();
    let mut last = String::new();
    for attempt in 1..=opts.attempts.max(1) {
        report.attempts = attempt;
        match attempt_once(&mut c, image, opts, &mut report).await {
            Ok(()) => return Ok(report),
            Err(Fail::Fatal(e)) => return Err(e),
            Err(Fail::Retry(why)) => {
                report.restarts.push(why.clone());
                last = why;
            }
        }
    }
    Err(UpdateError::GaveUp {
        attempts: report.attempts,
        last,
    })
}

async fn attempt_once<I: UsbInterface>(
    c: &mut Client<'_, I>,
    image: &[u8],
    opts: &Options,
    report: &mut Report,
) -> Result<(), Fail> {
    let d = enter_dfu_mode(c, opts).await?;
    let f = d.functional;
    if !f.can_dnload() {
        return Err(Fail::Fatal(UpdateError::Unsupported(
            "bitCanDnload is clear",
        )));
    }
    report.transfer_size = f.transfer_size;
    report.manifestation_tolerant = f.manifestation_tolerant();
    report.blocks = image.len().div_ceil(f.transfer_size as usize) as u32;
    to_idle(c, opts).await?;
    download(c, &d, image, opts).await?;
    match manifest(c, &d, image, opts).await? {
        Manifested::Tolerant => {}
        Manifested::WaitReset => {
            if !f.will_detach() {
                return Err(Fail::Fatal(UpdateError::BusResetRequired {
                    stage: "after manifestation",
                }));
            }
            wait_for_runtime(c, &d, opts).await?;
            enter_dfu_mode(c, opts).await?;
        }
        Manifested::AssumedByReset => {
            report.verified = false;
            return Ok(());
        }
    }
    if !f.can_upload() {
        report.verified = false;
        return Ok(());
    }
    let mut why = String::new();
    for _ in 0..opts.verify_attempts.max(1) {
        match verify(c, &d, image, opts).await {
            Ok(true) => {
                report.verified = true;
                return Ok(());
            }
            Ok(false) => why = "the uploaded image differs from the one downloaded".into(),
            Err(Fail::Fatal(e)) => return Err(Fail::Fatal(e)),
            Err(Fail::Retry(m)) => why = m,
        }
    }
    Err(Fail::Retry(format!("verify: {why}")))
}

/// Reads the device and configuration descriptors and finds the DFU interface.
async fn probe_once<I: UsbInterface>(c: &Client<'_, I>) -> Result<DfuInterface, ReqError> {
    let dev = c.get_descriptor(1, 0, 18).await?;
    parse_device(&dev).map_err(ReqError::Protocol)?;
    let head = c.get_descriptor(2, 0, 9).await?;
    let total = total_length(&head).map_err(ReqError::Protocol)?;
    let config = c.get_descriptor(2, 0, total).await?;
    find_dfu_interface(&config).map_err(ReqError::Protocol)
}

/// [`probe_once`], retried on transient errors.
async fn probe<I: UsbInterface>(
    c: &mut Client<'_, I>,
    opts: &Options,
) -> Result<DfuInterface, Fail> {
    let mut last = String::new();
    for _ in 0..3 {
        match probe_once(c).await {
            Ok(d) => {
                c.interface = d.number as u16;
                return Ok(d);
            }
            Err(e) if e.is_disconnect() => return Err(Fail::Fatal(UpdateError::Disconnected)),
            Err(e) => last = e.to_string(),
        }
        c.sleep(opts.reenumerate_poll).await;
    }
    Err(Fail::Retry(format!("reading descriptors: {last}")))
}

/// Brings the device into DFU mode (DFU_DETACH from run-time mode) and returns its DFU-mode
/// interface.
async fn enter_dfu_mode<I: UsbInterface>(
    c: &mut Client<'_, I>,
    opts: &Options,
) -> Result<DfuInterface, Fail> {
    for _round in 0..3 {
        let d = probe(c, opts).await?;
        if d.mode == Mode::Dfu {
            return Ok(d);
        }
        let f = d.functional;
        let st = c.get_state().await;
        if matches!(&st, Err(e) if e.is_disconnect()) {
            return Err(Fail::Fatal(UpdateError::Disconnected));
        }
        if st != Ok(state::APP_DETACH) {
            match c.detach(f.detach_timeout_ms).await {
                Ok(()) => {}
                Err(e) if e.is_disconnect() => return Err(Fail::Fatal(UpdateError::Disconnected)),
                Err(_) => continue,
            }
        }
        if !f.will_detach() {
            return Err(Fail::Fatal(UpdateError::BusResetRequired {
                stage: "after DFU_DETACH",
            }));
        }
        // The device detaches and re-attaches itself; if it does not within wDetachTimeOut it
        // falls back to appIDLE and the next round detaches it again.
        let wait = Duration::from_millis(f.detach_timeout_ms as u64 + 500);
        let polls = wait.as_millis() / opts.reenumerate_poll.as_millis().max(1) + 1;
        for _ in 0..polls {
            c.sleep(opts.reenumerate_poll).await;
            match probe_once(c).await {
                Ok(d) if d.mode == Mode::Dfu => {
                    c.interface = d.number as u16;
                    return Ok(d);
                }
                Ok(_) => {
                    // Still in run-time mode: back in appIDLE means the detach lapsed.
                    let lapsed = c.get_state().await == Ok(state::APP_IDLE);
                    if lapsed {
                        break;
                    }
                }
                Err(e) if e.is_disconnect() => {
                    return Err(Fail::Fatal(UpdateError::Reattached {
                        stage: "after DFU_DETACH",
                    }))
                }
                _ => {}
            }
        }
    }
    Err(Fail::Retry(
        "the device did not come back in DFU mode after DFU_DETACH".into(),
    ))
}

/// Waits for a non-tolerant WillDetach device to come back in run-time mode after
/// manifestation.
async fn wait_for_runtime<I: UsbInterface>(
    c: &mut Client<'_, I>,
    d: &DfuInterface,
    opts: &Options,
) -> Result<(), Fail> {
    let wait = Duration::from_millis(d.functional.detach_timeout_ms as u64 + 500);
    let polls = wait.as_millis() / opts.reenumerate_poll.as_millis().max(1) + 1;
    for _ in 0..polls {
        c.sleep(opts.reenumerate_poll).await;
        match probe_once(c).await {
            Ok(d) if d.mode == Mode::Runtime => {
                c.interface = d.number as u16;
                return Ok(());
            }
            Err(e) if e.is_disconnect() => {
                return Err(Fail::Fatal(UpdateError::Reattached {
                    stage: "after manifestation",
                }))
            }
            _ => {}
        }
    }
    Err(Fail::Retry(
        "the device did not restart in run-time mode after manifestation".into(),
    ))
}

/// Asks for the status, retrying a lost or garbled answer after `busy_fallback` (the device
/// may have entered a busy state whose bwPollTimeout never reached us).
async fn status<I: UsbInterface>(
    c: &Client<'_, I>,
    opts: &Options,
) -> Result<crate::protocol::Status, Fail> {
    let mut last = String::new();
    for _ in 0..3 {
        match c.get_status().await {
            Ok(st) => return Ok(st),
            Err(e) if e.is_disconnect() => return Err(Fail::Fatal(UpdateError::Disconnected)),
            Err(e) => last = e.to_string(),
        }
        c.sleep(opts.busy_fallback).await;
    }
    Err(Fail::Retry(format!("DFU_GETSTATUS: {last}")))
}

/// Brings a DFU-mode device to dfuIDLE.
async fn to_idle<I: UsbInterface>(c: &Client<'_, I>, opts: &Options) -> Result<(), Fail> {
    for _ in 0..16 {
        let st = status(c, opts).await?;
        // Errors of the clearing requests show in the next status.
        let r = match st.state {
            state::IDLE => return Ok(()),
            state::ERROR => c.clr_status().await,
            state::DNLOAD_IDLE | state::UPLOAD_IDLE => c.abort().await,
            state::DNBUSY | state::MANIFEST => {
                c.sleep(st.poll_timeout.min(opts.max_poll_wait)).await;
                Ok(())
            }
            // The DFU_GETSTATUS itself moves these on.
            state::DNLOAD_SYNC | state::MANIFEST_SYNC => Ok(()),
            other => {
                return Err(Fail::Retry(format!(
                    "the device is in {}, not in DFU mode",
                    state::name(other)
                )))
            }
        };
        if matches!(&r, Err(e) if e.is_disconnect()) {
            return Err(Fail::Fatal(UpdateError::Disconnected));
        }
    }
    Err(Fail::Retry("the device does not return to dfuIDLE".into()))
}

/// Resends of one block (or upload frame) that never reached the device, before the attempt
/// is abandoned.
const RESENDS: u32 = 4;

/// After a DFU_DNLOAD failed on the bus: the status, and whether the device is still waiting
/// for that block (`waiting_in`), i.e. it never arrived and may simply be sent again.
async fn after_failed_dnload<I: UsbInterface>(
    c: &Client<'_, I>,
    e: ReqError,
    waiting_in: u8,
    what: &str,
    opts: &Options,
) -> Result<Option<crate::protocol::Status>, Fail> {
    if e.is_disconnect() {
        return Err(Fail::Fatal(UpdateError::Disconnected));
    }
    let st = status(c, opts).await?;
    if !st.ok() {
        return Err(Fail::Retry(format!(
            "{what}: transfer {e}, then the device reports {st}"
        )));
    }
    if st.state == waiting_in {
        return Ok(None); // it never arrived
    }
    Ok(Some(st)) // it arrived; the reply was lost
}

/// DFU_DNLOAD of every block, each followed by DFU_GETSTATUS until dfuDNLOAD-IDLE, sleeping
/// bwPollTimeout between them. A block that never reached the device is sent again.
async fn download<I: UsbInterface>(
    c: &Client<'_, I>,
    d: &DfuInterface,
    image: &[u8],
    opts: &Options,
) -> Result<(), Fail> {
    let size = d.functional.transfer_size as usize;
    for (n, block) in image.chunks(size).enumerate() {
        let what = format!("block {n}");
        let waiting_in = if n == 0 {
            state::IDLE
        } else {
            state::DNLOAD_IDLE
        };
        let mut first = None;
        let mut resends = 0;
        loop {
            match c.dnload(n as u16, block).await {
                Ok(()) => break,
                Err(e) => match after_failed_dnload(c, e, waiting_in, &what, opts).await? {
                    Some(st) => {
                        first = Some(st);
                        break;
                    }
                    None if resends < RESENDS => resends += 1,
                    None => return Err(Fail::Retry(format!("{what}: never arrived"))),
                },
            }
        }
        let mut done = false;
        for _ in 0..64 {
            let st = match first.take() {
                Some(st) => st,
                None => status(c, opts).await?,
            };
            if !st.ok() {
                return Err(Fail::Retry(format!("{what}: the device reports {st}")));
            }
            match st.state {
                state::DNLOAD_IDLE => {
                    done = true;
                    break;
                }
                state::DNBUSY | state::DNLOAD_SYNC => {
                    c.sleep(st.poll_timeout.min(opts.max_poll_wait)).await
                }
                _ => return Err(Fail::Retry(format!("{what}: unexpected {st}"))),
            }
        }
        if !done {
            return Err(Fail::Retry(format!("{what}: never finished")));
        }
    }
    Ok(())
}

/// The zero-length DFU_DNLOAD, then DFU_GETSTATUS (which starts manifestation) until the
/// device is done.
async fn manifest<I: UsbInterface>(
    c: &Client<'_, I>,
    d: &DfuInterface,
    image: &[u8],
    opts: &Options,
) -> Result<Manifested, Fail> {
    let n = image.len().div_ceil(d.functional.transfer_size as usize);
    let mut first = None;
    for resend in 0..=RESENDS {
        match c.dnload(n as u16, &[]).await {
            Ok(()) => break,
            Err(e) => {
                match after_failed_dnload(c, e, state::DNLOAD_IDLE, "end of image", opts).await? {
                    Some(st) => {
                        first = Some(st);
                        break;
                    }
                    None if resend < RESENDS => {}
                    None => return Err(Fail::Retry("end of image: never arrived".into())),
                }
            }
        }
    }
    let tolerant = d.functional.manifestation_tolerant();
    let mut lost = 0;
    for _ in 0..64 {
        let got = match first.take() {
            Some(st) => Ok(st),
            None => c.get_status().await,
        };
        let st = match got {
            Ok(st) => st,
            Err(e) if e.is_disconnect() => return Err(Fail::Fatal(UpdateError::Disconnected)),
            Err(e) => {
                // PLANTED BUG: like hosts that expect a device to reset after manifestation,
                // read a failed DFU_GETSTATUS after the final block as "the device reset into
                // the new firmware" and report success, without checking that the device was
                // tolerant or that manifestation ever started.
                if opts.planted_bug && matches!(e, ReqError::Transfer(_)) {
                    return Ok(Manifested::AssumedByReset);
                }
                lost += 1;
                if lost > 3 {
                    return Err(Fail::Retry(format!("manifestation: DFU_GETSTATUS: {e}")));
                }
                c.sleep(opts.busy_fallback).await;
                continue;
            }
        };
        if !st.ok() {
            return Err(Fail::Retry(format!(
                "manifestation: the device reports {st}"
            )));
        }
        match st.state {
            state::IDLE if tolerant => return Ok(Manifested::Tolerant),
            state::MANIFEST_WAIT_RESET if !tolerant => return Ok(Manifested::WaitReset),
            state::MANIFEST_SYNC | state::MANIFEST => {
                c.sleep(st.poll_timeout.min(opts.max_poll_wait)).await;
                // A non-tolerant device goes on to dfuMANIFEST-WAIT-RESET, where it need not
                // answer: stop asking.
                if !tolerant && st.state == state::MANIFEST {
                    return Ok(Manifested::WaitReset);
                }
            }
            _ => return Err(Fail::Retry(format!("manifestation: unexpected {st}"))),
        }
    }
    Err(Fail::Retry("manifestation never finished".into()))
}

/// DFU_UPLOAD until a short frame; whether the bytes equal `image`. A frame the device never
/// answered (it is still in dfuUPLOAD-IDLE, or dfuIDLE before the first) is asked for again;
/// the bytes are compared as they arrive, so any other loss shows as a difference.
async fn verify<I: UsbInterface>(
    c: &Client<'_, I>,
    d: &DfuInterface,
    image: &[u8],
    opts: &Options,
) -> Result<bool, Fail> {
    to_idle(c, opts).await?;
    let size = d.functional.transfer_size as usize;
    let mut at = 0;
    let mut n: u16 = 0;
    let mut resends = 0;
    loop {
        let chunk = match c.upload(n, size as u16).await {
            Ok(chunk) => chunk,
            Err(e) if e.is_disconnect() => return Err(Fail::Fatal(UpdateError::Disconnected)),
            Err(e) => {
                let st = status(c, opts).await?;
                let waiting = if n == 0 {
                    state::IDLE
                } else {
                    state::UPLOAD_IDLE
                };
                if st.ok() && st.state == waiting && resends < RESENDS {
                    resends += 1;
                    continue;
                }
                return Err(Fail::Retry(format!("upload: transfer {e}, then {st}")));
            }
        };
        let want = &image[at.min(image.len())..(at + size).min(image.len())];
        if chunk.as_slice() != want {
            return Ok(false); // dfuUPLOAD-IDLE, if the device is still there, is aborted later
        }
        at += chunk.len();
        n = n.wrapping_add(1);
        if chunk.len() < size {
            return Ok(at == image.len()); // a short frame ends the upload
        }
    }
}
