//! The Trigger 6 model's bulk OUT receiver: DMA command headers and data into VRAM, video
//! headers decoded into flips, a command finished (a flip shown, a fence done) and framing
//! errors. Part of [`super`]'s `Trigger6`; nothing here answers a control request.

// The model's own types, helpers and imports: this file is part of it.
use super::*;

impl Trigger6 {
    /// A framing error on session `sig` (`None` or an unknown session: the stream itself).
    /// The command of that session is dropped (of every session when the stream lost its
    /// framing), and the receiver waits for a new header.
    pub(super) fn framing_error(
        &mut self,
        cx: &mut DevCtx<'_>,
        sig: Option<u32>,
        why: String,
    ) -> Reply {
        let sessions: Vec<u32> = match sig {
            Some(s) if s == SESSION_DISPLAY || s == SESSION_AUDIO => vec![s],
            _ => self.cmds.keys().copied().collect(),
        };
        for s in sessions {
            self.drop_command(cx, s);
        }
        self.rx = Rx::Header(Vec::new());
        self.refuse(cx, why)
    }

    /// A complete DMA header arrived.
    pub(super) fn accept_header(
        &mut self,
        cx: &mut DevCtx<'_>,
        h: DmaHeader,
    ) -> Result<(), String> {
        if h.signature != SESSION_DISPLAY && h.signature != SESSION_AUDIO {
            return Err(format!(
                "bulk: DMA session {:#x} is not modelled (display 0, audio 3)",
                h.signature
            ));
        }
        if h.packet_size == 0
            || h.packet_offset as u64 + h.packet_size as u64 > h.payload_len as u64
        {
            return Err(format!(
                "bulk: fragment {:#x}+{:#x} does not fit the payload of {:#x} bytes",
                h.packet_offset, h.packet_size, h.payload_len
            ));
        }
        let end = h.payload_addr as u64 + h.payload_len as u64;
        if h.signature == SESSION_DISPLAY
            && end > self.vram_size()
            && self.sabotage != Some(Sabotage::IgnoreVramBounds)
        {
            self.rejected_writes.push(RamWrite {
                addr: h.payload_addr as u64,
                len: h.payload_len as u64,
            });
            return Err(format!(
                "bulk: a write of {:#x} bytes at {:#x} reaches past the VRAM end {:#x}",
                h.payload_len,
                h.payload_addr,
                self.vram_size()
            ));
        }
        // Each session has its own command in progress: the capture interleaves audio
        // commands (session 3) between the fragments of a frame (session 0).
        match self.cmds.get(&h.signature) {
            Some(c) => {
                if c.payload_len != h.payload_len
                    || c.payload_addr != h.payload_addr
                    || c.next_offset != h.packet_offset
                {
                    return Err(format!(
                        "bulk: fragment at {:#x} of {:#x} bytes for {:#x} does not continue the command in progress (next {:#x} of {:#x} for {:#x})",
                        h.packet_offset, h.payload_len, h.payload_addr, c.next_offset, c.payload_len, c.payload_addr
                    ));
                }
            }
            None => {
                if h.packet_offset != 0 {
                    return Err(format!(
                        "bulk: a command starts with a fragment at offset {:#x}",
                        h.packet_offset
                    ));
                }
                if !cx.transition(dma_machine(h.signature), "idle", "receiving") {
                    self.rx = Rx::Header(Vec::new());
                    return Err("bulk: refused".into());
                }
                self.cmds.insert(
                    h.signature,
                    Command {
                        payload_len: h.payload_len,
                        payload_addr: h.payload_addr,
                        next_offset: 0,
                        head: Vec::new(),
                        video: None,
                        fragments: 0,
                        transfers: 0,
                        last_transfer: 0,
                    },
                );
            }
        }
        if let Some(c) = self.cmds.get_mut(&h.signature) {
            c.fragments += 1;
        }
        *self.dma.fragments.entry(h.signature).or_default() += 1;
        self.rx = Rx::Data { hdr: h, got: 0 };
        Ok(())
    }

    /// Data bytes of the command in progress on session `sig`, at `offset` inside its
    /// payload.
    pub(super) fn accept_data(
        &mut self,
        cx: &mut DevCtx<'_>,
        sig: u32,
        offset: u32,
        chunk: &[u8],
    ) -> Result<(), String> {
        let transfer = self.out_transfers;
        let Some(c) = self.cmds.get_mut(&sig) else {
            return Err("bulk: data without a command".into());
        };
        if c.last_transfer != transfer {
            c.last_transfer = transfer;
            c.transfers += 1;
        }
        if sig != SESSION_DISPLAY {
            return Ok(()); // audio PCM is accepted and not modelled
        }
        let addr = c.payload_addr as u64 + offset as u64;
        if let Some(Sabotage::FlipVramBit(bad)) = self.sabotage {
            if bad >= addr && bad < addr + chunk.len() as u64 {
                let mut v = chunk.to_vec();
                v[(bad - addr) as usize] ^= 1;
                self.vram.write(addr, &v);
            } else {
                self.vram.write(addr, chunk);
            }
        } else {
            self.vram.write(addr, chunk);
        }
        self.dma.display_writes += 1;
        self.dma.display_bytes += chunk.len() as u64;
        let c = self.cmds.get_mut(&sig).ok_or("bulk: command vanished")?;
        if (offset as usize) < VIDEO_HEADER_LEN && c.head.len() == offset as usize {
            let n = (VIDEO_HEADER_LEN - c.head.len()).min(chunk.len());
            c.head.extend_from_slice(&chunk[..n]);
            if c.head.len() == VIDEO_HEADER_LEN {
                let mut b = [0u8; VIDEO_HEADER_LEN];
                b.copy_from_slice(&c.head);
                let v = VideoHeader::parse(&b);
                let decoded = self.decode_flip(&v);
                if let Ok(flip) = decoded {
                    let o = flip.output as usize;
                    let from = if self.flips[o].shown.is_some() {
                        "shown"
                    } else {
                        "idle"
                    };
                    if !cx.transition(flip_machine(flip.output), from, "pending") {
                        if let Some(c) = self.cmds.get_mut(&sig) {
                            c.video = Some(Err("flip refused".into()));
                        }
                        return Err("bulk: flip refused".into());
                    }
                    self.flips[o].pending = Some(flip);
                    if self.outputs[o].modeset_in_progress {
                        cx.mark(marks::FLIP_DURING_MODESET);
                    }
                }
                if let Some(c) = self.cmds.get_mut(&sig) {
                    c.video = Some(decoded);
                }
            }
        }
        Ok(())
    }

    pub(super) fn decode_flip(&mut self, v: &VideoHeader) -> Result<FlipInfo, String> {
        let output = match v.command {
            bulk::CMD_FLIP_PRIMARY => 0,
            bulk::CMD_FLIP_SECONDARY => 1,
            c => {
                return Err(format!(
                    "video command {c} is not modelled (3 flip primary, 4 flip secondary)"
                ))
            }
        };
        if PixelFormat::from_code(v.target_format).is_none() || v.source_format != v.target_format {
            return Err(format!(
                "video formats {} -> {} are not modelled (NV12 6, RGB32 8, RGB24 9, unconverted)",
                v.source_format, v.target_format
            ));
        }
        self.flip_serial += 1;
        Ok(FlipInfo {
            output,
            fence: v.fence,
            format: v.target_format,
            y_offset: v.y_offset,
            uv_offset: v.uv_offset,
            y_pitch: v.y_pitch,
            uv_pitch: v.uv_pitch,
            serial: self.flip_serial,
        })
    }

    /// The last fragment of the command of session `sig` arrived.
    pub(super) fn finish_command(&mut self, cx: &mut DevCtx<'_>, sig: u32) -> Result<(), String> {
        let Some(c) = self.cmds.get(&sig).cloned() else {
            return Ok(());
        };
        if !cx.transition(dma_machine(sig), "receiving", "idle") {
            return Err("bulk: refused".into());
        }
        self.cmds.remove(&sig);
        self.rx = Rx::Header(Vec::new());
        *self.dma.payloads.entry(sig).or_default() += 1;
        if sig != SESSION_DISPLAY {
            return Ok(());
        }
        if c.fragments > 1 || c.transfers > 1 {
            cx.mark(marks::FRAGMENTED_FRAME);
        }
        let flip = match c.video {
            None => {
                return Err(format!(
                    "bulk: a display payload of {} bytes is shorter than a video header",
                    c.payload_len
                ))
            }
            Some(Err(e)) => return Err(format!("bulk: {e}")),
            Some(Ok(f)) => f,
        };
        let o = flip.output as usize;
        if self.flips[o].pending != Some(flip) {
            return Ok(());
        }
        if !cx.transition(flip_machine(flip.output), "pending", "shown") {
            return Err("bulk: flip refused".into());
        }
        self.flips[o].pending = None;
        self.flips[o].shown = Some(flip);
        if self.outputs[o].modeset_in_progress {
            cx.mark(marks::FLIP_DURING_MODESET);
        }
        let mut h = [0u8; VIDEO_HEADER_LEN];
        h.copy_from_slice(&c.head);
        self.flip_log.push(FlipRecord {
            flip,
            payload_addr: c.payload_addr,
            payload_len: c.payload_len,
            header: VideoHeader::parse(&h),
            fragments: c.fragments,
            bulk_transfers: c.transfers,
        });
        self.completed_fences.push(flip.fence);
        self.interrupts
            .push_back(bulk::display_interrupt(bulk::EVENT_FENCE_DONE, flip.fence));
        Ok(())
    }

    pub(super) fn bulk_out(&mut self, cx: &mut DevCtx<'_>, data: &[u8]) -> Reply {
        self.out_transfers += 1;
        let mut rest = data;
        loop {
            if let Rx::Data { hdr, got } = self.rx {
                if got == hdr.packet_size {
                    let next = hdr.packet_offset + hdr.packet_size;
                    if let Some(c) = self.cmds.get_mut(&hdr.signature) {
                        c.next_offset = next;
                    }
                    if hdr.flags & FLAG_CONTINUE == 0 {
                        if next != hdr.payload_len {
                            return self.framing_error(
                                cx,
                                Some(hdr.signature),
                                format!("bulk: last fragment ends at {next:#x}, the payload has {:#x} bytes", hdr.payload_len),
                            );
                        }
                        if let Err(e) = self.finish_command(cx, hdr.signature) {
                            return self.refuse(cx, e);
                        }
                    } else {
                        self.rx = Rx::Header(Vec::new());
                    }
                    continue;
                }
            }
            if rest.is_empty() {
                return Reply::Ack;
            }
            match std::mem::replace(&mut self.rx, Rx::Header(Vec::new())) {
                Rx::Header(mut buf) => {
                    let n = (DMA_HEADER_LEN - buf.len()).min(rest.len());
                    buf.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    if buf.len() < DMA_HEADER_LEN {
                        self.rx = Rx::Header(buf);
                        continue;
                    }
                    let mut b = [0u8; DMA_HEADER_LEN];
                    b.copy_from_slice(&buf);
                    let h = DmaHeader::parse(&b);
                    if let Err(e) = self.accept_header(cx, h) {
                        return self.framing_error(cx, Some(h.signature), e);
                    }
                }
                Rx::Data { hdr, got } => {
                    let n = ((hdr.packet_size - got) as usize).min(rest.len());
                    self.rx = Rx::Data {
                        hdr,
                        got: got + n as u32,
                    };
                    if let Err(e) =
                        self.accept_data(cx, hdr.signature, hdr.packet_offset + got, &rest[..n])
                    {
                        return self.refuse(cx, e);
                    }
                    rest = &rest[n..];
                }
            }
        }
    }
}
