import TimerdProtocol
import TimerdSystem

/// The bytes a connection has still to write: appended at the end, written from the front.
///
/// What is written is dropped from the front only once it is most of the buffer: a `LIST` reply of
/// 60 MB goes out a socket buffer (about 200 KB) at a time, and dropping each write's bytes at once
/// copied the rest of the reply every time (seconds of `memmove` for one reply).
struct OutputBuffer {
    private var bytes: [UInt8] = []
    /// Where the unwritten bytes start.
    private var start = 0

    /// Bytes not written yet.
    var count: Int { bytes.count - start }
    var isEmpty: Bool { start == bytes.count }

    static func += (buffer: inout OutputBuffer, new: some Sequence<UInt8>) {
        buffer.bytes.append(contentsOf: new)
    }

    /// Appends the reply's line and its newline, without copies of a large payload on the way.
    mutating func append(_ reply: Reply) {
        reply.appendLine(to: &bytes)
    }

    /// The offset of the first `byte` among the unwritten bytes.
    func firstIndex(of byte: UInt8) -> Int? {
        bytes[start...].firstIndex(of: byte).map { $0 - start }
    }

    /// Drops the unwritten bytes from `range.lowerBound` on.
    mutating func removeSubrange(_ range: PartialRangeFrom<Int>) {
        bytes.removeSubrange((start + range.lowerBound)...)
    }

    /// Writes what `fd` takes without blocking: how many bytes, or nil when it is full (`EAGAIN`).
    mutating func write(to fd: FileDescriptor) throws(Errno) -> Int? {
        let start = self.start
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(Errno) in try fd.tryWrite(UnsafeRawBufferPointer(rebasing: buffer[start...])) }
        }
        guard let written = try result.get() else { return nil }
        self.start += written
        if self.start == bytes.count {
            // Nothing left: keep the storage of a small buffer, give a large one back.
            bytes.removeAll(keepingCapacity: bytes.capacity <= Self.keptCapacity)
            self.start = 0
        } else if self.start >= Self.keptCapacity, self.start * 2 >= bytes.count {
            bytes.removeFirst(self.start)
            self.start = 0
        }
        return written
    }

    private static let keptCapacity = 1 << 16
}
