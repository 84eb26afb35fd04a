//! A worker's sample file (protocol: "Streams"): an anonymous file in memory (memfd) that the
//! worker gets as fd 3, open for appending, where its writer and any unit whose ring is full
//! append `S` and `F` frames. A write to it never waits for taskmeter, so however long the units
//! keep taskmeter's reader off the CPUs, no sample is lost: they wait in the file until the
//! reader comes. The reader reads at its own offset and gives back the memory it has read.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use taskmeter_protocol::frames::{whole_frame, ReadError, HEADER_BYTES, SAMPLE_FD};

/// What one read asks for: a writer's flush of 10,000 units' samples, or more, in a few reads.
const READ_BYTES: usize = 1 << 20;
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
    pub fn reader(self) -> SampleReader {
        SampleReader { file: self.file, offset: 0, buffer: vec![0; READ_BYTES], start: 0, end: 0, released: 0 }
    }
}

/// Reads a sample file as it grows, frame by frame.
pub struct SampleReader {
    file: File,
    /// Where the next read starts in the file.
    offset: u64,
    buffer: Vec<u8>,
    /// The unread bytes of `buffer`.
    start: usize,
    end: usize,
    /// The file's bytes before this have been given back.
    released: u64,
}

impl SampleReader {
    /// The next whole frame read so far (its kind and payload), or None: call `fill`.
    pub fn next_frame(&mut self) -> Result<Option<(u8, &[u8])>, ReadError> {
        match whole_frame(&self.buffer[self.start..self.end])? {
            Some((kind, len)) => {
                let at = self.start;
                self.start += len;
                Ok(Some((kind, &self.buffer[at + HEADER_BYTES..at + len])))
            }
            None => Ok(None),
        }
    }

    /// Reads what was appended since the last read (after `next_frame` found no whole frame);
    /// false when nothing was.
    pub fn fill(&mut self) -> io::Result<bool> {
        // A frame begun but not whole moves to the front, with room for all of it (its length
        // was checked by `next_frame`) and for half a read more.
        self.buffer.copy_within(self.start..self.end, 0);
        (self.end, self.start) = (self.end - self.start, 0);
        let begun = match self.buffer.get(1..HEADER_BYTES).filter(|_| self.end >= HEADER_BYTES) {
            Some(len) => HEADER_BYTES + u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize,
            None => 0,
        };
        let room = begun.max(self.end + READ_BYTES / 2);
        if self.buffer.len() < room {
            self.buffer.resize(room, 0);
        }
        let n = loop {
            match self.file.read_at(&mut self.buffer[self.end..], self.offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        self.end += n;
        self.offset += n as u64;
        if self.offset - self.released >= RELEASE_BYTES {
            self.release();
        }
        Ok(n > 0)
    }

    /// Gives back the memory of the pages already read (the file keeps its size).
    fn release(&mut self) {
        let upto = self.offset.saturating_sub(self.end as u64) & !4095;
        // SAFETY: fallocate on a descriptor we own, over a range we have read.
        let punched = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                upto as libc::off_t,
            )
        };
        if punched == 0 {
            self.released = upto;
        } else {
            // Not supported here: the file keeps its memory until the worker ends.
            self.released = u64::MAX >> 1;
        }
    }

    /// Bytes in the file not read yet (what the worker has written ahead of the reader).
    pub fn behind(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len().saturating_sub(self.offset))
    }

    /// Whether a frame was begun but not whole when the file was last read.
    pub fn holds_part(&self) -> bool {
        self.end > self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use taskmeter_protocol::frames::{put_json, put_samples, ChunkHead};
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
        let mut reader = file.reader();
        let mut bytes = Vec::new();
        let head = ChunkHead { unit: 1, origin_ns: 5, first: 0, by_unit: false };
        put_samples(&mut bytes, head, [Sample::default(); 3].into_iter());
        put_json(&mut bytes, b'E', &ErrorFrame { message: "x".into() });
        assert_eq!(kinds(&mut reader), [] as [u8; 0], "an empty file");
        // A frame written in two pieces is read only once whole.
        writer.write_all(&bytes[..20]).unwrap();
        assert_eq!(kinds(&mut reader), [] as [u8; 0]);
        assert!(reader.holds_part());
        writer.write_all(&bytes[20..]).unwrap();
        assert_eq!(kinds(&mut reader), [b'S', b'E']);
        assert!(!reader.holds_part());
        assert_eq!(reader.behind(), 0);
    }

    #[test]
    fn a_frame_larger_than_a_read_and_many_reads_are_whole_and_given_back() {
        let file = SampleFile::create().unwrap();
        let mut writer = file.file.try_clone().unwrap();
        let mut reader = file.reader();
        let big = vec![Sample::default(); 3 * READ_BYTES / 48];
        let mut total = 0;
        for first in 0..30u64 {
            let mut bytes = Vec::new();
            let head = ChunkHead { unit: 1, origin_ns: 5, first: first * big.len() as u64, by_unit: first % 2 == 1 };
            put_samples(&mut bytes, head, big.iter().copied());
            writer.write_all(&bytes).unwrap();
            total += bytes.len() as u64;
            let got = kinds(&mut reader);
            assert_eq!(got, [if first % 2 == 1 { b'F' } else { b'S' }]);
        }
        assert_eq!(reader.offset, total);
        assert!(reader.released >= RELEASE_BYTES, "read pages were given back ({} of {total})", reader.released);
        // Punched pages read as zeros and take no memory; the file keeps its size.
        assert!(file_blocks(&reader.file) * 512 < total - RELEASE_BYTES);
    }

    fn file_blocks(file: &File) -> u64 {
        use std::os::unix::fs::MetadataExt;
        file.metadata().unwrap().blocks()
    }
}
