//! usbredir bytes from the socket, cut by `proto::Framer` in arbitrary read sizes, with the
//! peer's capabilities taken from its hello as the bridge does. A packet that decodes
//! re-encodes to bytes that decode to the same packet.
#![no_main]

use calametra_fuzz::Input;
use calametra_qemu::proto::{Caps, Framer, Packet, HOST_CAPS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let from_host = flags & 1 == 1;
    let mut caps = Caps::new(HOST_CAPS);
    let mut framer = Framer::new();
    let mut chunk = (flags >> 1) as usize + 1;
    while !input.is_empty() {
        let bytes = input.take(chunk);
        chunk = chunk * 5 % 97 + 1;
        framer.push(bytes);
        let _ = framer.pending();
        loop {
            match framer.next(&caps, from_host) {
                None => break,
                Some(Err(_)) => return,
                Some(Ok(frame)) => {
                    let Ok(packet) = frame.packet else { continue };
                    if let Packet::Hello { caps: peer, .. } = &packet {
                        if caps.peer.is_none() {
                            caps.peer = Some(peer.first().copied().unwrap_or(0));
                        }
                        continue; // the version string is read lossily
                    }
                    let bytes = packet.encode(frame.id, &caps);
                    let hlen = caps.header_len();
                    let again = Packet::decode(frame.ty, &bytes[hlen..], &caps, from_host);
                    assert_eq!(again.as_ref(), Ok(&packet), "re-encoded {bytes:02x?}");
                    let _ = calametra_qemu::bridge::describe(&packet);
                }
            }
        }
    }
});
