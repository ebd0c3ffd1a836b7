//! How one transfer's answers are judged: the verdict of a control transfer ([`classify`]) and
//! of a bulk or interrupt one ([`classify_data`]), what is skipped and why, and the model gaps a
//! model's answer names. Part of [`super`] (re-exported there); nothing here replays a transfer
//! or prints a report.

// The comparison's imports and types: this file is part of it.
use super::*;

/// The verdict for one bulk or interrupt transfer, and a remark.
pub fn classify_data(t: &DataTransfer, model: &ModelAnswer) -> (DataVerdict, Option<String>) {
    let other = |model: &ModelAnswer| DataVerdict::Other {
        capture: t.status,
        model: model.to_string(),
    };
    if t.is_in() {
        if in_without_packet(t.status) {
            let note = Some(match t.status {
                Status::NoCompletion => "pending at the end of the capture".to_string(),
                s => format!("cancelled in the capture: {s}"),
            });
            return match model {
                ModelAnswer::Nothing => (DataVerdict::Same, note),
                ModelAnswer::Data(d) => (DataVerdict::ModelOnly { model: d.clone() }, note),
                m => (other(m), note),
            };
        }
        return match (t.status, model) {
            (Status::Ok, ModelAnswer::Data(m)) => {
                let cap = &t.data;
                if t.truncated {
                    let note = Some(format!(
                        "compared the {} captured bytes of {}",
                        cap.len(),
                        t.actual
                    ));
                    if m.get(..cap.len()) == Some(cap.as_slice()) && m.len() == t.actual as usize {
                        return (DataVerdict::Same, note);
                    }
                    return (differs(cap, m), note);
                }
                if cap == m {
                    (DataVerdict::Same, None)
                } else {
                    (differs(cap, m), None)
                }
            }
            (Status::Ok, ModelAnswer::Nothing) => (DataVerdict::CaptureOnly, None),
            (Status::Ok, ModelAnswer::Error(TransferError::Stall)) => {
                (DataVerdict::ModelStalls, None)
            }
            (Status::Stall, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::Same, None),
            (Status::Stall, _) => (DataVerdict::CaptureStalls, None),
            (_, m) => (other(m), None),
        };
    }
    match (t.status, model) {
        (Status::Ok, ModelAnswer::Accepted(n)) if *n as u64 == u64::from(t.actual) => {
            (DataVerdict::Same, None)
        }
        (Status::Ok, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::ModelStalls, None),
        (Status::Stall, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::Same, None),
        (Status::Stall, _) => (DataVerdict::CaptureStalls, None),
        (_, m) => (
            other(m),
            Some(format!(
                "the capture's device took {} of {} bytes",
                t.actual, t.requested
            )),
        ),
    }
}

fn differs(cap: &[u8], m: &[u8]) -> DataVerdict {
    let first = cap
        .iter()
        .zip(m)
        .position(|(a, b)| a != b)
        .unwrap_or(cap.len().min(m.len()));
    DataVerdict::Differs {
        capture: cap.to_vec(),
        model: m.to_vec(),
        first_difference: first,
    }
}

/// The model gaps among trace lines, as `request in state`.
pub(super) fn model_gaps(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("\"model_gap\""))
        .filter_map(|l| calametra_core::trace::parse_record(l, 0).ok())
        .filter(|r| r.kind == "model_gap")
        .map(|r| {
            let field = |k: &str| {
                r.data
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
                    .to_string()
            };
            format!("{} in {}", field("request"), field("state"))
        })
        .collect()
}

pub(super) fn skip_reason(t: &ControlTransfer) -> Option<String> {
    let s = &t.setup;
    if s.request_type == 0x00 && s.request == 5 {
        return Some(format!(
            "SET_ADDRESS {} is the host controller's and the bus's business, not the model's",
            s.value
        ));
    }
    if let Status::SubmitError(e) = t.status {
        return Some(format!(
            "the submission failed on the host ({e}); the device saw nothing"
        ));
    }
    if !s.is_in() && t.truncated {
        return Some(format!(
            "the capture kept {} of the {} OUT bytes; the request cannot be resent",
            t.data.len(),
            s.length
        ));
    }
    None
}

/// The verdict for one transfer, and a remark.
pub fn classify(
    t: &ControlTransfer,
    model: &Result<Vec<u8>, TransferError>,
) -> (Verdict, Option<String>) {
    match (t.status, model) {
        (Status::Ok, Ok(m)) if t.is_in() => compare_in(t, m),
        (Status::Ok, Ok(_)) => (Verdict::Same, None),
        (Status::Ok, Err(TransferError::Stall)) => (Verdict::ModelStalls, None),
        (Status::Stall, Err(TransferError::Stall)) => (Verdict::Same, None),
        (Status::Stall, Ok(m)) => (Verdict::CaptureStalls { model: m.clone() }, None),
        (capture, m) => (
            Verdict::Other {
                capture,
                model: match m {
                    Ok(d) if t.is_in() => format!("answered {} bytes", d.len()),
                    Ok(_) => "accepted".into(),
                    Err(e) => e.to_string(),
                },
            },
            None,
        ),
    }
}

fn compare_in(t: &ControlTransfer, m: &[u8]) -> (Verdict, Option<String>) {
    let cap = &t.data;
    let first = cap
        .iter()
        .zip(m)
        .position(|(a, b)| a != b)
        .unwrap_or(cap.len().min(m.len()));
    if t.truncated {
        let note = Some(format!(
            "compared the {} captured bytes of {}",
            cap.len(),
            t.actual
        ));
        let prefix_same = m.get(..cap.len()) == Some(cap.as_slice());
        if prefix_same && m.len() == t.actual as usize {
            return (Verdict::Same, note);
        }
        let first = if prefix_same { cap.len() } else { first };
        return (
            Verdict::Differs {
                capture: cap.clone(),
                model: m.to_vec(),
                first_difference: first,
            },
            note,
        );
    }
    if cap.as_slice() == m {
        (Verdict::Same, None)
    } else {
        (
            Verdict::Differs {
                capture: cap.clone(),
                model: m.to_vec(),
                first_difference: first,
            },
            None,
        )
    }
}
