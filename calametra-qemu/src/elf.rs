//! What an ELF executable needs to run in the guest: its program interpreter (`PT_INTERP`:
//! none for a static executable) and the shared libraries it names (`DT_NEEDED`). Read from
//! the bytes, bounds-checked: a cut or malformed file is an error naming what is wrong, never
//! a panic. Nothing here runs or loads the file.

/// How an executable or shared library is linked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Linking {
    /// The program interpreter (`/lib64/ld-linux-x86-64.so.2`); `None` for a static
    /// executable (and for a shared library).
    pub interpreter: Option<String>,
    /// The shared libraries it names (`DT_NEEDED`), in order.
    pub needed: Vec<String>,
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;

/// Whether `bytes` start like an ELF file (any class): what is not one (a shell script) is
/// run as it is.
pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// One program header: type, file offset, virtual address, size in the file.
struct Segment {
    ty: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(i..i.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(i..i.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(i..i.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `bytes[at..at + len]`, `None` past the end.
fn slice(bytes: &[u8], at: u64, len: u64) -> Option<&[u8]> {
    let at = usize::try_from(at).ok()?;
    let end = at.checked_add(usize::try_from(len).ok()?)?;
    bytes.get(at..end)
}

/// The NUL-terminated string at `at`.
fn c_str(bytes: &[u8], at: u64) -> Option<String> {
    let rest = bytes.get(usize::try_from(at).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The interpreter and needed libraries of a 64-bit little-endian ELF file (x86-64's). `Err`
/// names what is not there: not such an ELF file, cut program headers, a dynamic section or
/// string table outside the file.
pub fn linking(bytes: &[u8]) -> Result<Linking, String> {
    if bytes.len() < 64 || !is_elf(bytes) || bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let phoff = u64_at(bytes, 0x20).ok_or("truncated ELF header")?;
    let size = u64::from(u16_at(bytes, 0x36).ok_or("truncated ELF header")?);
    let count = u64::from(u16_at(bytes, 0x38).ok_or("truncated ELF header")?);
    let mut segments = Vec::new();
    for i in 0..count {
        let at = i
            .checked_mul(size)
            .and_then(|o| o.checked_add(phoff))
            .and_then(|a| usize::try_from(a).ok())
            .ok_or("program header offset out of range")?;
        let cut = "truncated program headers";
        segments.push(Segment {
            ty: u32_at(bytes, at).ok_or(cut)?,
            offset: u64_at(bytes, at + 8).ok_or(cut)?,
            vaddr: u64_at(bytes, at + 16).ok_or(cut)?,
            filesz: u64_at(bytes, at + 32).ok_or(cut)?,
        });
    }
    let mut out = Linking::default();
    if let Some(s) = segments.iter().find(|s| s.ty == PT_INTERP) {
        let text = slice(bytes, s.offset, s.filesz).ok_or("PT_INTERP outside the file")?;
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        out.interpreter = Some(String::from_utf8_lossy(&text[..end]).into_owned());
    }
    let Some(dynamic) = segments.iter().find(|s| s.ty == PT_DYNAMIC) else {
        return Ok(out);
    };
    let table =
        slice(bytes, dynamic.offset, dynamic.filesz).ok_or("PT_DYNAMIC outside the file")?;
    let mut entries = Vec::new();
    for e in table.chunks_exact(16) {
        let (tag, val) = (u64_at(e, 0).unwrap_or(0), u64_at(e, 8).unwrap_or(0));
        if tag == DT_NULL {
            break;
        }
        entries.push((tag, val));
    }
    let Some(&(_, strtab)) = entries.iter().find(|(t, _)| *t == DT_STRTAB) else {
        return Ok(out);
    };
    // DT_STRTAB is an address: the file offset is found through the loaded segment holding it.
    let strtab_off = segments
        .iter()
        .filter(|s| s.ty == PT_LOAD)
        .find(|s| s.vaddr <= strtab && strtab - s.vaddr < s.filesz)
        .map(|s| s.offset + (strtab - s.vaddr))
        .ok_or("the dynamic string table is in no loaded segment")?;
    for &(tag, val) in &entries {
        if tag == DT_NEEDED {
            let name = strtab_off
                .checked_add(val)
                .and_then(|at| c_str(bytes, at))
                .ok_or("a DT_NEEDED name outside the file")?;
            out.needed.push(name);
        }
    }
    Ok(out)
}

/// An ELF file with an interpreter, a loaded segment at 0x1000 holding the string table and
/// a dynamic section naming `libusb-1.0.so.0` and `libc.so.6` (for tests).
#[cfg(test)]
pub(crate) fn dynamic_elf() -> Vec<u8> {
    tests::dynamic_elf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// See [`super::dynamic_elf`].
    pub(super) fn dynamic_elf() -> Vec<u8> {
        let mut b = vec![0u8; 0x400];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        let ph = |b: &mut Vec<u8>, i: usize, ty: u32, off: u64, vaddr: u64, size: u64| {
            let at = 64 + 56 * i;
            b[at..at + 4].copy_from_slice(&ty.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            b[at + 16..at + 24].copy_from_slice(&vaddr.to_le_bytes());
            b[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
        };
        ph(&mut b, 0, PT_INTERP, 0x200, 0, 28);
        ph(&mut b, 1, PT_LOAD, 0x300, 0x1000, 0x100);
        ph(&mut b, 2, PT_DYNAMIC, 0x240, 0, 64);
        b[0x200..0x21b].copy_from_slice(b"/lib64/ld-linux-x86-64.so.2");
        let strs = b"\0libusb-1.0.so.0\0libc.so.6\0";
        b[0x300..0x300 + strs.len()].copy_from_slice(strs);
        let dy = [
            (DT_NEEDED, 1u64),
            (DT_STRTAB, 0x1000),
            (DT_NEEDED, 17),
            (0, 0),
        ];
        for (i, (t, v)) in dy.iter().enumerate() {
            b[0x240 + 16 * i..0x248 + 16 * i].copy_from_slice(&t.to_le_bytes());
            b[0x248 + 16 * i..0x250 + 16 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn the_interpreter_and_needed_libraries_are_read() {
        let l = linking(&dynamic_elf()).unwrap();
        assert_eq!(
            l.interpreter.as_deref(),
            Some("/lib64/ld-linux-x86-64.so.2")
        );
        assert_eq!(l.needed, ["libusb-1.0.so.0", "libc.so.6"]);
    }

    #[test]
    fn a_bad_file_is_an_error_never_a_panic() {
        assert!(linking(b"#!/bin/sh\n").is_err());
        let mut far = dynamic_elf();
        far[0x248 + 16..0x250 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(linking(&far).is_err(), "string table address in no segment");
        let mut name = dynamic_elf();
        name[0x248..0x250].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(linking(&name).is_err(), "a name past the end");
        for cut in [70, 0x210, 0x250, 0x310] {
            let _ = linking(&dynamic_elf()[..cut]);
        }
    }
}
