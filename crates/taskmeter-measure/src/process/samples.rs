//! A worker's sample file (protocol: "Streams"): an anonymous file in memory (memfd) that the
//! worker gets as fd 3, open for appending, where its writer and any unit whose ring is full
//! append `S` and `F` frames. A write to it never waits for taskmeter, so however long the units
//! keep taskmeter's reader off the CPUs, no sample is lost: they wait in the file until the
//! reader comes. The reader reads at its own offset and gives back the memory it has read.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use taskmeter_protocol::frames::{whole_frame, ReadError, HEADER_BYTES, MAX_PAYLOAD, SAMPLE_FD};

/// The part of the file the reader maps at once: a window from a page of the file on, and the
/// longest frame beyond it, so a frame that begins in the window lies whole in the mapping.
const WINDOW: u64 = 256 << 20;
const MAPPED: usize = (WINDOW as usize + HEADER_BYTES + MAX_PAYLOAD).next_multiple_of(PAGE as usize);
const PAGE: u64 = 4096;
/// The read part of the file is given back to the kernel in steps of this much.
const RELEASE_BYTES: u64 = 32 << 20;

/// The sample file of one worker.
pub struct SampleFile {
    file: File,
}

impl SampleFile {
    /// A new, empty sample file, open for appending (the flag the worker's descriptor shares).
    pub fn create() -> io::Result<SampleFile> {
        // SAFETY: a NUL-terminated name; memfd_create makes a new descriptor, owned below.
        let fd = unsafe { libc::memfd_create(c"taskmeter-samples".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        // SAFETY: fcntl on a descriptor we own.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_APPEND) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SampleFile { file })
    }

    /// Makes the file the calling process's fd 3, kept across exec. Runs in the child between
    /// fork and exec: system calls only.
    pub fn install_in_child(fd: RawFd) -> io::Result<()> {
        // SAFETY: plain system calls on descriptors of the calling process.
        let done = unsafe {
            if fd == SAMPLE_FD {
                // dup2 onto itself would keep close-on-exec.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, SAMPLE_FD)
            }
        };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// A reader of the file from its start.
    pub fn reader(self) -> io::Result<SampleReader> {
        let mut reader =
            SampleReader { file: self.file, map: std::ptr::null(), map_start: 0, offset: 0, size: 0, released: 0 };
        reader.map_at(0)?;
        Ok(reader)
    }
}

/// Reads a sample file as it grows, frame by frame, in place: the file is mapped, so a frame is
/// read where the worker wrote it, with no copy (a read(2) of each megabyte was a fifth of the
/// reader's time at a million samples a second, in the kernel's copy and page-cache bookkeeping).
pub struct SampleReader {
    file: File,
    /// `MAPPED` bytes of the file from `map_start`, read-only and shared.
    map: *const u8,
    map_start: u64,
    /// Where the next frame starts.
    offset: u64,
    /// The file's size when last looked at: every byte below it is written (an append makes its
    /// bytes visible before it grows the file).
    size: u64,
    /// The file's bytes before this have been given back.
    released: u64,
}

// SAFETY: the mapping belongs to the reader alone and goes with it.
unsafe impl Send for SampleReader {}

impl Drop for SampleReader {
    fn drop(&mut self) {
        // SAFETY: unmaps the reader's own mapping, which no slice outlives (they borrow self).
        unsafe { libc::munmap(self.map as *mut libc::c_void, MAPPED) };
    }
}

impl SampleReader {
    /// Maps the window that starts at the page holding `at`.
    fn map_at(&mut self, at: u64) -> io::Result<()> {
        let start = at & !(PAGE - 1);
        // SAFETY: a new shared read-only mapping of a file we own; the old one is unmapped
        // after, and no slice of it outlives this &mut borrow. Pages past the file's end are
        // never touched (reads stop at `size`).
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                MAPPED,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                self.file.as_raw_fd(),
                start as libc::off_t,
            );
            if map == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            // Read once, in order: giving back pages the kernel saw as read by a sequential
            // reader skips moving each on its lists of recently used ones (a 32 MiB punch took
            // 5.4-5.8 ms, not 6.5-7.0, `sample_cost`). Advice only: a refusal changes nothing.
            libc::madvise(map, MAPPED, libc::MADV_SEQUENTIAL);
            if !self.map.is_null() {
                libc::munmap(self.map as *mut libc::c_void, MAPPED);
            }
            self.map = map as *const u8;
        }
        self.map_start = start;
        Ok(())
    }

    /// The next whole frame written so far (its kind and payload), or None: call `fill`.
    #[inline]
    pub fn next_frame(&mut self) -> Result<Option<(u8, &[u8])>, ReadError> {
        if self.offset >= self.map_start + WINDOW {
            self.map_at(self.offset).map_err(ReadError::Io)?;
        }
        let within = (self.offset - self.map_start) as usize;
        let end = self.size.min(self.map_start + MAPPED as u64);
        // SAFETY: the bytes from `offset` to `end` are mapped and written (below `size`).
        let bytes = unsafe { std::slice::from_raw_parts(self.map.add(within), (end - self.offset) as usize) };
        match whole_frame(bytes)? {
            Some((kind, len)) => {
                self.offset += len as u64;
                Ok(Some((kind, &bytes[HEADER_BYTES..len])))
            }
            None => Ok(None),
        }
    }

    /// Looks at how much the worker has appended (after `next_frame` found no whole frame);
    /// false when nothing was.
    pub fn fill(&mut self) -> io::Result<bool> {
        let size = self.file.metadata()?.len();
        let grew = size > self.size;
        self.size = size;
        if self.offset.saturating_sub(self.released) >= RELEASE_BYTES {
            self.release();
        }
        Ok(grew)
    }

    /// Gives back the memory of the pages already read (the file keeps its size).
    fn release(&mut self) {
        let upto = self.offset & !(PAGE - 1);
        // SAFETY: fallocate on a descriptor we own, over a range we have read (from where the
        // last one ended).
        let punched = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                self.released as libc::off_t,
                (upto - self.released) as libc::off_t,
            )
        };
        if punched == 0 {
            self.released = upto;
        } else {
            // Not supported here: the file keeps its memory until the worker ends.
            self.released = u64::MAX >> 1;
        }
    }

    /// Where the next frame starts in the file: the bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes of the file not read yet when it was last looked at (`fill`): how far the worker
    /// has written ahead of the reader.
    pub fn behind(&self) -> u64 {
        self.size.saturating_sub(self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use taskmeter_protocol::frames::{put_json, put_samples, ChunkHead, SAMPLE_BYTES};
    use taskmeter_protocol::{ErrorFrame, Sample};

    fn kinds(reader: &mut SampleReader) -> Vec<u8> {
        let mut kinds = Vec::new();
        loop {
            if let Some((kind, _)) = reader.next_frame().unwrap() {
                kinds.push(kind);
            } else if !reader.fill().unwrap() {
                return kinds;
            }
        }
    }

    #[test]
    fn frames_are_read_as_they_are_appended_even_in_pieces() {
        let file = SampleFile::create().unwrap();
        let mut writer = file.file.try_clone().unwrap();
        let mut reader = file.reader().unwrap();
        let mut bytes = Vec::new();
        let head = ChunkHead { unit: 1, origin_ns: 5, first: 0, by_unit: false };
        put_samples(&mut bytes, head, [Sample::default(); 3].into_iter());
        put_json(&mut bytes, b'E', &ErrorFrame { message: "x".into() });
        assert_eq!(kinds(&mut reader), [] as [u8; 0], "an empty file");
        // A frame written in two pieces is read only once whole.
        writer.write_all(&bytes[..20]).unwrap();
        assert_eq!(kinds(&mut reader), [] as [u8; 0]);
        assert_eq!(reader.behind(), 20, "a frame begun, not whole");
        writer.write_all(&bytes[20..]).unwrap();
        assert_eq!(kinds(&mut reader), [b'S', b'E']);
        assert_eq!(reader.behind(), 0);
    }

    /// Frames of 12 MiB, past a window and across its end, are read whole, and what was read
    /// is given back.
    #[test]
    fn frames_across_windows_are_whole_and_their_memory_given_back() {
        let file = SampleFile::create().unwrap();
        let mut writer = file.file.try_clone().unwrap();
        let mut reader = file.reader().unwrap();
        let big = vec![Sample::default(); 1 << 18];
        // Enough frames of `big` to pass the window by two.
        let frames = WINDOW / (big.len() * SAMPLE_BYTES) as u64 + 2;
        let mut total = 0;
        for first in 0..frames {
            let mut bytes = Vec::new();
            let head = ChunkHead { unit: 1, origin_ns: 5, first: first * big.len() as u64, by_unit: first % 2 == 1 };
            put_samples(&mut bytes, head, big.iter().copied());
            writer.write_all(&bytes).unwrap();
            total += bytes.len() as u64;
            let got = kinds(&mut reader);
            assert_eq!(got, [if first % 2 == 1 { b'F' } else { b'S' }]);
        }
        assert_eq!(reader.offset, total);
        assert!(total > WINDOW && reader.map_start > 0, "the window moved ({total} bytes)");
        assert!(reader.released >= RELEASE_BYTES, "read pages were given back ({} of {total})", reader.released);
        // Punched pages read as zeros and take no memory; the file keeps its size.
        assert!(file_blocks(&reader.file) * 512 < total - RELEASE_BYTES);
    }

    /// The mapping is advised as read in order (smaps says `sr`), which makes each punch cheaper.
    #[test]
    fn the_mapping_is_read_in_order() {
        let reader = SampleFile::create().unwrap().reader().unwrap();
        let flags = taskmeter_machine::smaps::flags_of_mapping_at(reader.map as usize).expect("in smaps");
        assert!(flags.iter().any(|flag| flag == "sr"), "VmFlags: {flags:?}");
    }

    fn file_blocks(file: &File) -> u64 {
        use std::os::unix::fs::MetadataExt;
        file.metadata().unwrap().blocks()
    }
}
