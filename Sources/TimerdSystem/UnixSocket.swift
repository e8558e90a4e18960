import CTimerdSys
import Glibc

/// Why a Unix socket could not be set up or reached.
public enum SocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path does not fit in `sockaddr_un.sun_path` (`limit` bytes, without the final NUL).
    case pathTooLong(path: String, limit: Int)
    /// A live server already accepts connections on the path.
    case alreadyListening(path: String)
    /// Something other than a socket exists at the path; it was left alone.
    case notASocket(path: String)
    /// A system call failed; `operation` names it ("bind", "connect", "mkdir", ...).
    case failed(operation: String, path: String, errno: Errno)

    public var description: String {
        switch self {
        case let .pathTooLong(path, limit):
            "socket path is too long (\(path.utf8.count) bytes, at most \(limit)): \(path)"
        case let .alreadyListening(path):
            "another timerd is listening on \(path)"
        case let .notASocket(path):
            "\(path) exists and is not a socket; refusing to replace it"
        case let .failed(operation, path, errno):
            "\(operation) \(path): \(errno)"
        }
    }

    /// The underlying error number, if a system call failed.
    public var errno: Errno? {
        if case let .failed(_, _, errno) = self { errno } else { nil }
    }
}

/// The identity of the process at the other end of a connected Unix socket.
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// Unix-domain stream sockets: the daemon's control socket and the client's connection to it.
public enum UnixSocket {
    /// The longest socket path in bytes (`sun_path` less its terminating NUL): 107 on Linux.
    /// `SOCK_STREAM`, for checks such as `sd_is_socket_unix`.
    public static let streamType = Int32(SOCK_STREAM.rawValue)

    public static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Creates a listening socket at `path`, close-on-exec and non-blocking (for a Dispatch
    /// read source plus `accept`).
    ///
    /// Creates missing parent directories with `directoryMode`. A socket file already at `path`
    /// is probed: if a server accepts the probe, throws `.alreadyListening`; if the connection is
    /// refused (a stale file from a dead daemon) it is unlinked and replaced. Anything that is not
    /// a socket is never removed (`.notASocket`). The socket file gets exactly `mode`: the socket
    /// carries it before `bind` (so it never appears with wider permissions) and `chmod` fixes
    /// what the umask removed.
    ///
    /// The corresponding C functions are `socket`, `bind`, `chmod` and `listen`.
    public static func listen(
        path: String, backlog: Int32 = 64, mode: UInt32 = 0o600, directoryMode: UInt32 = 0o755
    ) throws(SocketError) -> FileDescriptor {
        try checkLength(path)
        let parent = FileSystem.directoryName(of: path)
        do {
            try FileSystem.makeDirectories(parent, mode: directoryMode)
        } catch {
            throw .failed(operation: "mkdir", path: parent, errno: error)
        }
        try removeStaleSocket(at: path)

        let fd = try newSocket(path: path, nonBlocking: true)
        do {
            // Linux creates the socket inode with the unbound socket's mode less the umask.
            _ = try retryOnInterrupt { fchmod(fd.rawValue, mode) }
        } catch {
            try? fd.close()
            throw .failed(operation: "fchmod", path: path, errno: error)
        }
        let bound = withSocketAddress(path) { address, length in Glibc.bind(fd.rawValue, address, length) }
        if bound == -1 {
            let error = Errno.current
            try? fd.close()
            if error == .addressInUse {
                // Another daemon bound the path between our probe and our bind.
                throw .alreadyListening(path: path)
            }
            throw .failed(operation: "bind", path: path, errno: error)
        }
        var operation = "chmod"
        do {
            _ = try retryOnInterrupt { chmod(path, mode) }
            operation = "listen"
            _ = try retryOnInterrupt { Glibc.listen(fd.rawValue, backlog) }
        } catch {
            try? fd.close()
            _ = Glibc.unlink(path)
            throw .failed(operation: operation, path: path, errno: error)
        }
        return fd
    }

    /// The path a listening socket is bound to (nil for an unnamed or abstract socket), e.g. to set the
    /// permissions of a socket systemd created. A relative path (`timerd --socket t.sock`) is as it was
    /// bound: relative to the working directory, which timerd never changes.
    ///
    /// The corresponding C function is `getsockname`.
    public static func localPath(_ socket: FileDescriptor) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket.rawValue, $0, &length) }
        }
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let bytes = withUnsafeBytes(of: &address.sun_path) { raw in
            Array(raw.prefix(max(0, Int(length) - MemoryLayout<sa_family_t>.size)).prefix { $0 != 0 })
        }
        guard !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Accepts one pending connection as a close-on-exec, non-blocking descriptor; nil when none
    /// is pending (EAGAIN) or the pending one was aborted by its client (ECONNABORTED).
    ///
    /// The corresponding C function is `accept4`.
    public static func accept(_ listener: FileDescriptor) throws(Errno) -> FileDescriptor? {
        do {
            let fd = try retryOnInterrupt { tsys_accept4_cloexec_nonblock(listener.rawValue) }
            return FileDescriptor(rawValue: fd)
        } catch .wouldBlock, .connectionAborted {
            return nil
        }
    }

    /// Connects to the server at `path` with a blocking, close-on-exec socket (for the client).
    /// `.failed(operation: "connect", ...)` carries ENOENT (no socket file) or ECONNREFUSED (no
    /// server) for the caller to explain.
    ///
    /// The corresponding C functions are `socket` and `connect`.
    public static func connect(path: String) throws(SocketError) -> FileDescriptor {
        try checkLength(path)
        let fd = try newSocket(path: path, nonBlocking: false)
        do {
            try connect(fd, path)
        } catch {
            try? fd.close()
            throw .failed(operation: "connect", path: path, errno: error)
        }
        return fd
    }

    /// The pid, uid and gid of the process that connected (or listened) at the other end.
    ///
    /// The corresponding C function is `getsockopt` (`SO_PEERCRED`).
    public static func peerCredentials(_ socket: FileDescriptor) throws(Errno) -> PeerCredentials {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        _ = try checkResult(tsys_peer_credentials(socket.rawValue, &pid, &uid, &gid))
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    /// Shuts down the sending side: the peer reads end of file once it has read what was sent.
    ///
    /// The corresponding C function is `shutdown` (`SHUT_WR`).
    public static func shutdownWrite(_ socket: FileDescriptor) throws(Errno) {
        _ = try checkResult(Glibc.shutdown(socket.rawValue, Int32(SHUT_WR)))
    }

    // MARK: Helpers

    private static func checkLength(_ path: String) throws(SocketError) {
        if path.utf8.count > maximumPathLength || path.isEmpty {
            throw .pathTooLong(path: path, limit: maximumPathLength)
        }
    }

    private static func newSocket(path: String, nonBlocking: Bool) throws(SocketError) -> FileDescriptor {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking {
            type |= Int32(SOCK_NONBLOCK.rawValue)
        }
        let fd = Glibc.socket(AF_UNIX, type, 0)
        if fd == -1 {
            throw .failed(operation: "socket", path: path, errno: .current)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// connect(2) that survives EINTR: an interrupted connect goes on in the background, so a
    /// retry reports EISCONN (done) or EALREADY (still going; then wait for writability).
    private static func connect(_ fd: FileDescriptor, _ path: String) throws(Errno) {
        var interrupted = false
        while true {
            if withSocketAddress(path, { Glibc.connect(fd.rawValue, $0, $1) }) == 0 {
                return
            }
            let error = Errno.current
            switch error {
            case .interrupted:
                interrupted = true
            case Errno(rawValue: EISCONN) where interrupted:
                return
            case Errno(rawValue: EALREADY) where interrupted:
                var entry = pollfd(fd: fd.rawValue, events: Int16(POLLOUT), revents: 0)
                _ = try retryOnInterrupt { poll(&entry, 1, -1) }
            default:
                throw error
            }
        }
    }

    /// Unlinks a stale socket file at `path`; see `listen`.
    private static func removeStaleSocket(at path: String) throws(SocketError) {
        var info = stat()
        if lstat(path, &info) == -1 {
            let error = Errno.current
            if error == .noSuchFileOrDirectory {
                return
            }
            throw .failed(operation: "lstat", path: path, errno: error)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw .notASocket(path: path)
        }
        // A non-blocking probe: a live server with a full backlog answers EAGAIN instead of
        // making us wait, and still counts as live.
        let probe = try newSocket(path: path, nonBlocking: true)
        defer { try? probe.close() }
        let result = withSocketAddress(path) { Glibc.connect(probe.rawValue, $0, $1) }
        let error = result == 0 ? nil : Errno.current
        switch error {
        case nil, .wouldBlock?, Errno(rawValue: EINPROGRESS)?:
            throw .alreadyListening(path: path)
        case .connectionRefused?:
            if Glibc.unlink(path) == -1 && Errno.current != .noSuchFileOrDirectory {
                throw .failed(operation: "unlink", path: path, errno: .current)
            }
        case .noSuchFileOrDirectory?:
            return  // Removed meanwhile.
        case let error?:
            throw .failed(operation: "connect", path: path, errno: error)
        }
    }

    /// Calls `body` with a `sockaddr_un` for `path` (whose length was checked) and its length.
    private static func withSocketAddress<Result>(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result
    ) -> Result {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count <= maximumPathLength, "unchecked socket path length")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
