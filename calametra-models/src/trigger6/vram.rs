//! The dock's video RAM as sparse memory: 64 KiB pages allocated on first write, unwritten
//! bytes read as zero. The store knows nothing of the VRAM size the dock reports; bounds are
//! the model's job, and [`Vram::extent`] lets an invariant check them independently.
//! Pages live in a `BTreeMap`, so nothing here depends on hash order.

use std::collections::BTreeMap;

const PAGE_BITS: u32 = 16;
const PAGE: u64 = 1 << PAGE_BITS;

/// Sparse byte-addressed memory.
#[derive(Default, Clone)]
pub struct Vram {
    pages: BTreeMap<u64, Box<[u8]>>,
    extent: u64,
    generation: u64,
}

impl Vram {
    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let mut at = addr;
        let mut rest = data;
        while !rest.is_empty() {
            let page = at >> PAGE_BITS;
            let off = (at & (PAGE - 1)) as usize;
            let n = rest.len().min(PAGE as usize - off);
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[off..off + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            at += n as u64;
        }
        self.extent = self.extent.max(addr + data.len() as u64);
        self.generation += 1;
    }

    /// Reads `out.len()` bytes at `addr` (zeros where nothing was written).
    pub fn read_into(&self, addr: u64, out: &mut [u8]) {
        let mut at = addr;
        let mut done = 0;
        while done < out.len() {
            let page = at >> PAGE_BITS;
            let off = (at & (PAGE - 1)) as usize;
            let n = (out.len() - done).min(PAGE as usize - off);
            match self.pages.get(&page) {
                Some(p) => out[done..done + n].copy_from_slice(&p[off..off + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
            at += n as u64;
        }
    }

    /// `len` bytes at `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.read_into(addr, &mut v);
        v
    }

    /// The offset of the first byte at `addr..` that differs from `want`, if any.
    pub fn first_difference(&self, addr: u64, want: &[u8]) -> Option<usize> {
        let mut at = addr;
        let mut done = 0;
        let zeros = [0u8; PAGE as usize];
        while done < want.len() {
            let page = at >> PAGE_BITS;
            let off = (at & (PAGE - 1)) as usize;
            let n = (want.len() - done).min(PAGE as usize - off);
            let have: &[u8] = match self.pages.get(&page) {
                Some(p) => &p[off..off + n],
                None => &zeros[..n],
            };
            let w = &want[done..done + n];
            if have != w {
                let i = have.iter().zip(w).position(|(a, b)| a != b).unwrap_or(0);
                return Some(done + i);
            }
            done += n;
            at += n as u64;
        }
        None
    }

    /// One past the highest byte ever written (0 when nothing was).
    pub fn extent(&self) -> u64 {
        self.extent
    }

    /// Counts writes; changes whenever the contents may have changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes of backing store allocated.
    pub fn allocated(&self) -> usize {
        self.pages.len() * PAGE as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_writes_read_back_across_pages() {
        let mut v = Vram::default();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        v.write(PAGE - 7, &data);
        assert_eq!(v.read(PAGE - 7, data.len()), data);
        assert_eq!(v.read(0, 4), vec![0; 4]);
        assert_eq!(v.extent(), PAGE - 7 + data.len() as u64);
        assert_eq!(v.first_difference(PAGE - 7, &data), None);
        let mut other = data.clone();
        other[70_000] ^= 1;
        assert_eq!(v.first_difference(PAGE - 7, &other), Some(70_000));
        assert_eq!(v.first_difference(10 * PAGE, &[0, 0, 1]), Some(2));
        assert_eq!(v.allocated(), 5 * PAGE as usize);
    }
}
