//! Arbitrary bytes never panic the usbredir parser: thousands of deterministic pseudo-random
//! streams, every truncation of valid packets, and bodies of every known type with random
//! lengths. Errors are values. Needs neither QEMU nor the guest.

use calametra_qemu::proto::{Caps, Framer, Packet, HOST_CAPS};

/// xorshift64*: deterministic bytes, no OS randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const TYPES: [u32; 34] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    26, 27, 100, 101, 102, 103, 104, 999,
];

fn caps_variants() -> [Caps; 3] {
    [
        Caps::new(HOST_CAPS),
        Caps {
            ours: HOST_CAPS,
            peer: Some(0xff),
        },
        Caps {
            ours: 0xffff_ffff,
            peer: Some(0xffff_ffff),
        },
    ]
}

/// Drains a framer; returns how many frames came out (every one is a value).
fn drain(f: &mut Framer, caps: &Caps, from_host: bool) -> usize {
    let mut n = 0;
    while let Some(r) = f.next(caps, from_host) {
        n += 1;
        if r.is_err() || n > 100_000 {
            break;
        }
    }
    n
}

#[test]
fn random_streams_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..5000 {
        let caps = caps_variants()[case % 3];
        let mut f = Framer::new();
        // Mix plausible headers (a known type, a small length) with raw noise.
        for _ in 0..rng.below(8) + 1 {
            if rng.below(3) == 0 {
                let n = rng.below(300) as usize;
                f.push(&rng.bytes(n));
            } else {
                let ty = TYPES[rng.below(TYPES.len() as u64) as usize];
                let len = rng.below(200) as u32;
                let mut p = ty.to_le_bytes().to_vec();
                p.extend_from_slice(&len.to_le_bytes());
                let idlen = if rng.below(2) == 0 { 4 } else { 8 };
                p.extend_from_slice(&rng.bytes(idlen + len as usize));
                f.push(&p);
            }
            drain(&mut f, &caps, case % 2 == 0);
        }
    }
}

#[test]
fn every_body_length_of_every_type_decodes_to_a_value() {
    let mut rng = Rng(42);
    for caps in caps_variants() {
        for ty in TYPES {
            for len in 0..400 {
                let body = rng.bytes(len);
                let _ = Packet::decode(ty, &body, &caps, false);
                let _ = Packet::decode(ty, &body, &caps, true);
            }
        }
    }
}

#[test]
fn every_truncation_of_valid_packets_waits_or_errs() {
    let caps = Caps {
        ours: HOST_CAPS,
        peer: Some(0xff),
    };
    let mut rng = Rng(7);
    let mut stream = Packet::Hello {
        version: "qemu usb-redir guest 10.0.2".into(),
        caps: vec![0xff],
    }
    .encode(0, &caps);
    for i in 0..200u64 {
        let p = match i % 4 {
            0 => Packet::SetConfiguration { configuration: 1 },
            1 => Packet::Bulk {
                endpoint: 0x01,
                status: calametra_qemu::proto::Status::Success,
                length: 5,
                stream_id: 0,
                data: rng.bytes(5),
            },
            2 => Packet::StartInterruptReceiving { endpoint: 0x81 },
            _ => Packet::CancelDataPacket,
        };
        stream.extend_from_slice(&p.encode(i, &caps));
    }
    let mut whole = 0;
    for cut in 0..stream.len() {
        let mut f = Framer::new();
        f.push(&stream[..cut]);
        let n = drain(&mut f, &caps, false);
        assert!(n <= 201);
        // Feeding the rest completes the stream exactly.
        f.push(&stream[cut..]);
        let rest = drain(&mut f, &caps, false);
        assert_eq!(n + rest, 201, "cut at {cut}");
        assert_eq!(f.pending(), 0);
        whole += 1;
    }
    assert!(whole > 2000, "{whole} truncations");
    // Corrupting single bytes never panics either.
    for i in 0..stream.len().min(3000) {
        let mut s = stream.clone();
        s[i] ^= 0xff;
        let mut f = Framer::new();
        f.push(&s);
        drain(&mut f, &caps, false);
    }
}
