import CTimerdSys
import Glibc

/// An open file descriptor. A value type: copying it does not duplicate the descriptor, and
/// exactly one owner must `close()` it. Every descriptor this module creates is close-on-exec.
public struct FileDescriptor: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The raw descriptor number, for APIs such as `DispatchSource.makeReadSource(fileDescriptor:)`.
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    public var description: String { "fd \(rawValue)" }

    public static let standardInput = FileDescriptor(rawValue: 0)
    public static let standardOutput = FileDescriptor(rawValue: 1)
    public static let standardError = FileDescriptor(rawValue: 2)

    /// How a file is opened.
    public enum AccessMode: Sendable {
        case readOnly, writeOnly, readWrite

        var flags: Int32 {
            switch self {
            case .readOnly: O_RDONLY
            case .writeOnly: O_WRONLY
            case .readWrite: O_RDWR
            }
        }
    }

    /// Extra `open` flags. `O_CLOEXEC` is always added.
    public struct OpenOptions: OptionSet, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let create = OpenOptions(rawValue: O_CREAT)
        public static let exclusiveCreate = OpenOptions(rawValue: O_CREAT | O_EXCL)
        public static let truncate = OpenOptions(rawValue: O_TRUNC)
        public static let append = OpenOptions(rawValue: O_APPEND)
        public static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
        public static let directory = OpenOptions(rawValue: O_DIRECTORY)
        public static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
    }

    /// Opens `path`, close-on-exec; `permissions` applies when `options` contains `.create`.
    /// Retries on EINTR; throws the `errno` of the failure.
    ///
    /// The corresponding C function is `open`.
    public static func open(
        _ path: String, _ access: AccessMode, options: OpenOptions = [], permissions: UInt32 = 0o644
    ) throws(Errno) -> FileDescriptor {
        let flags = access.flags | options.rawValue | O_CLOEXEC
        let fd = try retryOnInterrupt { Glibc.open(path, flags, permissions) }
        return FileDescriptor(rawValue: fd)
    }

    /// Opens `path` relative to the directory open as `directory` (an absolute `path` ignores it),
    /// close-on-exec. Retries on EINTR; throws the `errno` of the failure.
    ///
    /// The corresponding C function is `openat`.
    public static func open(
        _ path: String, in directory: FileDescriptor, _ access: AccessMode, options: OpenOptions = []
    ) throws(Errno) -> FileDescriptor {
        let flags = access.flags | options.rawValue | O_CLOEXEC
        let fd = try retryOnInterrupt { Glibc.openat(directory.rawValue, path, flags, 0o644) }
        return FileDescriptor(rawValue: fd)
    }

    /// Opens /dev/null, close-on-exec.
    ///
    /// The corresponding C function is `open`.
    public static func openDevNull(_ access: AccessMode = .readWrite) throws(Errno) -> FileDescriptor {
        try open("/dev/null", access)
    }

    /// Creates a pipe with both ends close-on-exec; the read end is made non-blocking when asked
    /// (for a Dispatch read source), the write end stays blocking (for a child's stdout/stderr).
    ///
    /// The corresponding C function is `pipe2`.
    public static func makePipe(
        nonBlockingRead: Bool = false
    ) throws(Errno) -> (read: FileDescriptor, write: FileDescriptor) {
        var fds: (Int32, Int32) = (-1, -1)
        let result = withUnsafeMutablePointer(to: &fds) {
            $0.withMemoryRebound(to: Int32.self, capacity: 2) { tsys_pipe_cloexec($0, nonBlockingRead ? 1 : 0) }
        }
        _ = try checkResult(result)
        return (FileDescriptor(rawValue: fds.0), FileDescriptor(rawValue: fds.1))
    }

    /// Closes the descriptor. Never retried: on Linux the descriptor is released even when
    /// `close` reports EINTR, and retrying could close a descriptor another thread just opened.
    ///
    /// The corresponding C function is `close`.
    public func close() throws(Errno) {
        if Glibc.close(rawValue) == -1 {
            let error = Errno.current
            if error != .interrupted {
                throw error
            }
        }
    }

    /// Writes the file's data and metadata to the device (for a directory: its entries).
    ///
    /// The corresponding C function is `fsync`.
    public func sync() throws(Errno) {
        _ = try retryOnInterrupt { fsync(rawValue) }
    }

    /// Turns `O_NONBLOCK` on or off.
    ///
    /// The corresponding C function is `fcntl` (`F_GETFL`/`F_SETFL`).
    public func setNonBlocking(_ nonBlocking: Bool = true) throws(Errno) {
        let flags = try retryOnInterrupt { fcntl(rawValue, F_GETFL) }
        let wanted = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        if wanted != flags {
            _ = try retryOnInterrupt { fcntl(rawValue, F_SETFL, wanted) }
        }
    }

    /// Sets `FD_CLOEXEC` (for descriptors inherited from a parent, such as systemd's listening sockets).
    ///
    /// The corresponding C function is `fcntl` (`F_GETFD`/`F_SETFD`).
    public func setCloseOnExec() throws(Errno) {
        let flags = try retryOnInterrupt { fcntl(rawValue, F_GETFD) }
        if flags & FD_CLOEXEC == 0 {
            _ = try retryOnInterrupt { fcntl(rawValue, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// The device and inode of the open file, e.g. to compare stderr with `$JOURNAL_STREAM`.
    ///
    /// The corresponding C function is `fstat`.
    public func deviceAndInode() throws(Errno) -> (device: UInt64, inode: UInt64) {
        var info = stat()
        _ = try retryOnInterrupt { fstat(rawValue, &info) }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// Whether `O_NONBLOCK` is set.
    ///
    /// The corresponding C function is `fcntl` (`F_GETFL`).
    public func isNonBlocking() throws(Errno) -> Bool {
        try retryOnInterrupt { fcntl(rawValue, F_GETFL) } & O_NONBLOCK != 0
    }

    /// Whether the descriptor refers to a terminal.
    ///
    /// The corresponding C function is `isatty`.
    public var isTerminal: Bool { isatty(rawValue) == 1 }

    // MARK: Blocking I/O

    /// Reads up to `buffer.count` bytes, retrying on EINTR. Returns 0 at end of file.
    /// On a non-blocking descriptor with nothing to read this throws `Errno.wouldBlock`; use
    /// `tryRead(into:)` there instead.
    ///
    /// The corresponding C function is `read`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryOnInterrupt { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `count` bytes (fewer at end of file; empty means end of file).
    ///
    /// The corresponding C function is `read`.
    public func read(upToCount count: Int) throws(Errno) -> [UInt8] {
        // Uninitialized: a run's output is read 64 KiB at a time, and zeroing that was 1% of the daemon's
        // CPU at 1,000 runs a second, most reads being one line or the end of file.
        var failure: Errno?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(Errno) {
                initialized = try read(into: UnsafeMutableRawBufferPointer(buffer))
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Reads until end of file. For pipes and small files (e.g. /proc) on a blocking descriptor.
    ///
    /// The corresponding C function is `read`.
    public func readToEnd(chunkSize: Int = 65536) throws(Errno) -> [UInt8] {
        var result: [UInt8] = []
        while true {
            let chunk = try read(upToCount: chunkSize)
            if chunk.isEmpty {
                return result
            }
            result.append(contentsOf: chunk)
        }
    }

    /// Writes once, retrying on EINTR; returns how many bytes were written (possibly fewer).
    ///
    /// The corresponding C function is `write`.
    public func write(_ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try retryOnInterrupt { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes every byte, looping over short writes, for blocking descriptors.
    ///
    /// The corresponding C function is `write`.
    public func writeAll(_ buffer: UnsafeRawBufferPointer) throws(Errno) {
        var offset = 0
        while offset < buffer.count {
            offset += try write(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
        }
    }

    /// Writes every byte of `bytes`, looping over short writes, for blocking descriptors.
    ///
    /// The corresponding C function is `write`.
    public func writeAll(_ bytes: some Collection<UInt8>) throws(Errno) {
        let done: Errno?? = bytes.withContiguousStorageIfAvailable { buffer in
            do throws(Errno) {
                try writeAll(UnsafeRawBufferPointer(buffer))
                return nil
            } catch {
                return error
            }
        }
        switch done {
        case .some(.none): return
        case .some(.some(let error)): throw error
        case .none: try writeAll(Array(bytes))
        }
    }

    /// Writes the UTF-8 of `string`, looping over short writes, for blocking descriptors.
    ///
    /// The corresponding C function is `write`.
    public func writeAll(_ string: String) throws(Errno) {
        try writeAll(string.utf8)
    }

    // MARK: Non-blocking I/O

    /// Reads what is available without blocking: the byte count (0 at end of file), or nil when
    /// nothing is available yet (EAGAIN). Retries on EINTR.
    ///
    /// The corresponding C function is `read`.
    public func tryRead(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int? {
        do {
            return try read(into: buffer)
        } catch .wouldBlock {
            return nil
        }
    }

    /// Reads up to `count` available bytes without blocking: empty at end of file, nil when
    /// nothing is available yet (EAGAIN).
    ///
    /// The corresponding C function is `read`.
    public func tryRead(upToCount count: Int) throws(Errno) -> [UInt8]? {
        do {
            return try read(upToCount: count)
        } catch .wouldBlock {
            return nil
        }
    }

    /// Writes what fits without blocking: the count written (possibly short), or nil when the
    /// descriptor is full (EAGAIN). Throws `Errno.brokenPipe` when the peer is gone (SIGPIPE
    /// must be ignored; see `Signals.ignore`).
    ///
    /// The corresponding C function is `write`.
    public func tryWrite(_ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int? {
        do {
            return try write(buffer)
        } catch .wouldBlock {
            return nil
        }
    }

    /// Writes what fits of `bytes` without blocking; nil when the descriptor is full (EAGAIN).
    ///
    /// The corresponding C function is `write`.
    public func tryWrite(_ bytes: some Collection<UInt8>) throws(Errno) -> Int? {
        let result: Result<Int?, Errno>? = bytes.withContiguousStorageIfAvailable { buffer in
            do throws(Errno) {
                return .success(try tryWrite(UnsafeRawBufferPointer(buffer)))
            } catch {
                return .failure(error)
            }
        }
        if let result {
            return try result.get()
        }
        return try tryWrite(Array(bytes))
    }

    // MARK: Waiting

    /// Waits until the descriptor is readable (or at end of file / hung up), for at most
    /// `timeoutMilliseconds` (-1 waits forever). Returns false on timeout. Retries on EINTR with
    /// the full timeout again, so an interrupted wait may last longer than asked.
    ///
    /// The corresponding C function is `poll`.
    public func waitReadable(timeoutMilliseconds: Int32 = -1) throws(Errno) -> Bool {
        var entry = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
        let ready = try retryOnInterrupt { poll(&entry, 1, timeoutMilliseconds) }
        return ready > 0
    }
}
