//! The Trigger 6 model's control requests: standard requests (chapter 9 from the spec's
//! descriptors), the vendor requests (status, EDID, timing, modeset, reset, cancel) and the
//! refusals and model gaps they end in. Part of [`super`]'s `Trigger6`; nothing here receives
//! bulk data.

// The model's own types, helpers and imports: this file is part of it.
use super::*;

impl Trigger6 {
    pub(super) fn gap(&self, cx: &mut DevCtx<'_>, setup: &Setup, why: &str) -> Reply {
        cx.model_gap(
            &format!(
                "control {:02x}/{:02x} wValue {:#06x} wIndex {:#06x} wLength {} ({why})",
                setup.request_type, setup.request, setup.value, setup.index, setup.length
            ),
            &self.state_summary(),
        );
        Reply::Stall
    }

    pub(super) fn refuse(&mut self, cx: &mut DevCtx<'_>, what: String) -> Reply {
        cx.record("rejected", |d| {
            d.str("why", &what);
        });
        self.rejected.push(what);
        Reply::Stall
    }

    pub(super) fn data(setup: &Setup, mut v: Vec<u8>) -> Reply {
        v.truncate(setup.length as usize);
        Reply::Data(v)
    }

    pub(super) fn standard(&mut self, cx: &mut DevCtx<'_>, setup: &Setup) -> Reply {
        let [lo, hi] = setup.value.to_le_bytes();
        match (setup.request_type, setup.request) {
            (0x80, 6) => match hi {
                1 => Self::data(setup, self.facts.device.clone()),
                2 if lo == 0 => Self::data(setup, self.facts.configuration.clone()),
                0x0f => Self::data(setup, self.facts.bos.clone()),
                3 if lo == 0 => Self::data(setup, self.facts.strings[&0].clone()),
                3 => match self.facts.strings.get(&lo) {
                    Some(s) if self.facts.languages.contains(&setup.index) => {
                        Self::data(setup, s.clone())
                    }
                    _ => self.gap(cx, setup, "string descriptor not in the spec"),
                },
                // The descriptor set is the capture's, read whole; what USB itself says of a
                // descriptor it lacks is evidence enough for a stall, and no gap:
                // - bNumConfigurations is 1: no configuration at another index (USB 2.0 and
                //   USB 3.2 §9.4.3, a descriptor the device does not support is a Request Error);
                // - the capture shows a SuperSpeed device (bcdUSB 0x0310, bMaxPacketSize0 9):
                //   one operating at SuperSpeed answers GetDescriptor() for a device_qualifier or
                //   an other_speed_configuration with a Request Error (USB 3.2 §9.4.3, §9.6.2);
                // - the other standard types it lacks (debug, interface, endpoint, companion...),
                //   each with its clause in `chapter9`.
                2 | 6 | 7 => Reply::Stall,
                t if chapter9::absent_descriptor(t).is_some() => Reply::Stall,
                _ => self.gap(cx, setup, "descriptor type not in the spec"),
            },
            (0x80, 8) => Self::data(setup, vec![self.configuration]),
            (0x00, 5) => {
                let to = if setup.value == 0 {
                    "default"
                } else {
                    "addressed"
                };
                let from = if self.address == 0 {
                    "default"
                } else {
                    "addressed"
                };
                if from != to && !cx.transition("address", from, to) {
                    return Reply::Stall;
                }
                self.address = (setup.value & 0x7f) as u8;
                Reply::Ack
            }
            (0x00, 9) if setup.value <= 1 => {
                let name = |c: u8| if c == 0 { "unconfigured" } else { "configured" };
                let to = setup.value as u8;
                if to != self.configuration
                    && !cx.transition("config", name(self.configuration), name(to))
                {
                    return Reply::Stall;
                }
                self.configuration = to;
                Reply::Ack
            }
            (0x01, 11) if setup.index == 0 && setup.value == 0 => Reply::Ack,
            (0x81, 10) if setup.index == 0 => Self::data(setup, vec![0]),
            (0x80..=0x82, 0) => Self::data(setup, vec![0, 0]),
            // SET_FEATURE U1/U2 enable (in the capture) and endpoint halt; CLEAR_FEATURE.
            (0x00 | 0x02, 1 | 3) => Reply::Ack,
            // USB 3 SET_SEL and SET_ISOCH_DELAY (in the capture).
            (0x00, 0x30) | (0x00, 0x31) => Reply::Ack,
            _ => self.gap(cx, setup, "standard request not in the spec"),
        }
    }

    pub(super) fn output_of(&self, v: u16) -> Option<usize> {
        (v < 2).then_some(v as usize)
    }

    pub(super) fn vendor(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0xc0, 0x88) => {
                let mib = match self.sabotage {
                    Some(Sabotage::ReportVramMib(m)) => m,
                    _ => self.facts.vram_mib,
                };
                Self::data(setup, vec![mib])
            }
            (0x40, 0x14) => self.cancel_bulk_out(cx),
            (0xc0, 0x87) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let mut c = self.outputs[o].connected;
                if self.sabotage == Some(Sabotage::StatusStuckConnected) {
                    c = true;
                }
                self.outputs[o].last_status = Some(c);
                Self::data(setup, vec![c as u8])
            }
            (0xc0, 0x80) => {
                let Some(o) = self.output_of(setup.index) else {
                    return self.gap(cx, setup, "no such output");
                };
                let out = &self.outputs[o];
                let at = setup.value as usize;
                if !out.connected {
                    return self.refuse(cx, format!("get_edid on output {o}: no monitor"));
                }
                if at >= out.edid.len() {
                    return self.refuse(
                        cx,
                        format!("get_edid at {at}: the EDID has {} bytes", out.edid.len()),
                    );
                }
                let end = (at + setup.length as usize).min(out.edid.len());
                Self::data(setup, out.edid[at..end].to_vec())
            }
            (0xc0, 0x84) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let n = self.facts.tables[o].len() as u32;
                Self::data(setup, n.to_le_bytes().to_vec())
            }
            (0xc0, 0x89) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let table = &self.facts.tables[o];
                let total = table.len() * RECORD_LEN;
                let at = (setup.index as usize).min(total);
                let end = (at + setup.length as usize).min(total);
                let mut v = Vec::with_capacity(end - at);
                for i in at..end {
                    v.push(table[i / RECORD_LEN][i % RECORD_LEN]);
                }
                Reply::Data(v)
            }
            (0x40, 0x1c) => {
                let to = match setup.value {
                    0x0000 => "low",
                    0x0100 => "high",
                    0x0002 => "finalised",
                    _ => return self.gap(cx, setup, "init value not in the capture"),
                };
                if to != self.init && !cx.transition("init", self.init, to) {
                    return Reply::Stall;
                }
                self.init = to;
                if to == "finalised" {
                    for o in &mut self.outputs {
                        o.modeset_in_progress = false;
                    }
                }
                Reply::Ack
            }
            (0x40, 0x1d) => {
                if !matches!(setup.index, 0x100 | 0x200 | 0x400) {
                    return self.gap(cx, setup, "LUT channel not in the capture");
                }
                if data.len() != 256 {
                    return self.refuse(cx, format!("set_lut with {} bytes, not 256", data.len()));
                }
                if self.luts.is_empty() && !cx.transition("lut", "default", "loaded") {
                    return Reply::Stall;
                }
                self.luts.insert(setup.index, data.to_vec());
                Reply::Ack
            }
            (0x40, 0x30) => self.hardware_reset(cx),
            (0x40, 0x12) => self.set_mode(cx, setup, data),
            (0x40, 0x31) => {
                if self.ready.is_empty() && !cx.transition("ready", "off", "on") {
                    return Reply::Stall;
                }
                self.ready.insert(setup.value);
                Reply::Ack
            }
            (0x40, 0x03) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let on = match setup.index {
                    0 => false,
                    1 => true,
                    _ => return self.gap(cx, setup, "monitor control other than 0/1"),
                };
                let name = |b: bool| if b { "on" } else { "off" };
                if on != self.outputs[o].enabled
                    && !cx.transition(display_machine(o), name(!on), name(on))
                {
                    return Reply::Stall;
                }
                self.outputs[o].enabled = on;
                Reply::Ack
            }
            (0x40, 0x24) => {
                // The audio engine state that aud_get_engine_state (0xa4) returns; its first
                // word is the engine's Activity (the capture starts it after the modeset).
                let key = (0xc0, 0xa4, 0, setup.index);
                let active = |d: &[u8]| d.iter().take(4).any(|b| *b != 0);
                let was = self.replies.get(&key).is_some_and(|d| active(d));
                let now = active(data);
                let machine = if setup.index == 0 { "audio0" } else { "audio1" };
                let name = |a: bool| if a { "running" } else { "stopped" };
                if was != now && !cx.transition(machine, name(was), name(now)) {
                    return Reply::Stall;
                }
                self.replies.insert(key, data.to_vec());
                Reply::Ack
            }
            (0x40, 0x23) => {
                // The node value that aud_get_node_value (0xa3) returns.
                self.replies
                    .insert((0xc0, 0xa3, setup.value, setup.index), data.to_vec());
                Reply::Ack
            }
            (ty, req) => {
                let key = (ty, req, setup.value, setup.index);
                if let Some(r) = self.replies.get(&key) {
                    return Self::data(setup, r.clone());
                }
                if self.facts.acked_out.contains(&(ty, req)) {
                    return Reply::Ack;
                }
                self.gap(cx, setup, "request not in the spec")
            }
        }
    }

    pub(super) fn set_mode(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let Some(o) = self.output_of(setup.value) else {
            return self.gap(cx, setup, "no such output");
        };
        let Some(t) = Timing::parse(data) else {
            return self.refuse(cx, format!("set_mode with {} bytes, not 32", data.len()));
        };
        let known = self.facts.tables[o]
            .iter()
            .filter_map(|r| Timing::parse(r))
            .any(|r| r.same_geometry(&t));
        if !known && self.sabotage != Some(Sabotage::AcceptAnyTiming) {
            return self.refuse(
                cx,
                format!("set_mode on output {o}: {t} is not in the output's timing table"),
            );
        }
        let from = if self.outputs[o].mode.is_some() {
            "set"
        } else {
            "unset"
        };
        if !cx.transition(mode_machine(o), from, "set") {
            return Reply::Stall;
        }
        let mut b = [0u8; RECORD_LEN];
        b.copy_from_slice(data);
        self.outputs[o].mode = Some(b);
        self.outputs[o].modeset_in_progress = true;
        if self.flips[o].pending.is_some() {
            cx.mark(marks::FLIP_DURING_MODESET);
        }
        Reply::Ack
    }

    pub(super) fn hardware_reset(&mut self, cx: &mut DevCtx<'_>) -> Reply {
        if !cx.transition("init", self.init, "cold") {
            return Reply::Stall;
        }
        self.init = "cold";
        self.ready.clear();
        self.luts.clear();
        for o in &mut self.outputs {
            o.mode = None;
            o.modeset_in_progress = false;
            o.enabled = false;
        }
        self.flips = [FlipState::default(); 2];
        self.cmds.clear();
        self.rx = Rx::Header(Vec::new());
        Reply::Ack
    }

    pub(super) fn cancel_bulk_out(&mut self, cx: &mut DevCtx<'_>) -> Reply {
        let sessions: Vec<u32> = self.cmds.keys().copied().collect();
        for sig in sessions {
            if !self.drop_command(cx, sig) {
                return Reply::Stall;
            }
        }
        self.rx = Rx::Header(Vec::new());
        Reply::Ack
    }

    /// Drops the DMA command in progress on session `sig` and its pending flip. `false` when a
    /// transition was refused (nothing changed).
    pub(super) fn drop_command(&mut self, cx: &mut DevCtx<'_>, sig: u32) -> bool {
        if !self.cmds.contains_key(&sig) {
            return true;
        }
        if !cx.transition(dma_machine(sig), "receiving", "idle") {
            return false;
        }
        if let Some(Some(Ok(flip))) = self.cmds.get(&sig).map(|c| c.video.clone()) {
            let o = flip.output as usize;
            if self.flips[o].pending.is_some()
                && cx.transition(flip_machine(flip.output), "pending", "cancelled")
            {
                self.flips[o].pending = None;
            }
        }
        self.cmds.remove(&sig);
        self.rx = Rx::Header(Vec::new());
        true
    }
}
