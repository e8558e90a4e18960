import Glibc

/// The few file-system calls the store makes around SQLite.
enum Files {
    private static func failure(_ what: String) -> StoreError {
        StoreError("\(what): \(String(cString: strerror(errno)))")
    }

    /// Creates `path` and its missing parents with mode 0700; fine when it is already a directory.
    static func makeDirectories(_ path: String) throws(StoreError) {
        guard !path.isEmpty else { throw StoreError("the state directory is empty") }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw failure("cannot create \(prefix)") }
        }
        var info = stat()
        guard stat(path, &info) == 0 else { throw failure("cannot use \(path)") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw StoreError("\(path) is not a directory") }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The first `count` bytes of the file (fewer when it is shorter).
    static func prefix(_ path: String, count: Int) throws(StoreError) -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open \(path)") }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + filled, count - filled, off_t(filled)) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw failure("cannot read \(path)") }
            if got == 0 { break }
            filled += got
        }
        return Array(bytes[0..<filled])
    }

    /// Creates an empty file with `mode` unless something exists at `path` (SQLite gives its -wal and
    /// -shm files the mode of the database file).
    static func createIfMissing(_ path: String, mode: mode_t) throws(StoreError) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd >= 0 {
            Glibc.close(fd)
        } else if errno != EEXIST {
            throw failure("cannot create \(path)")
        }
    }

    /// Renames `path` (and its `-wal` and `-shm`) to `path.corrupt-<UTC time>`, with `-2`, `-3` … added
    /// when that name is taken; returns the new name of `path`.
    static func moveAside(_ path: String) throws(StoreError) -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var broken = tm()
        gmtime_r(&seconds, &broken)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let stamp = pad(broken.tm_year + 1900, 4) + pad(broken.tm_mon + 1, 2) + pad(broken.tm_mday, 2) + "T"
            + pad(broken.tm_hour, 2) + pad(broken.tm_min, 2) + pad(broken.tm_sec, 2) + "Z"
        let base = "\(path).corrupt-\(stamp)"
        var target = base
        var attempt = 1
        while ["", "-wal", "-shm"].contains(where: { exists(target + $0) }) {
            attempt += 1
            target = "\(base)-\(attempt)"
        }
        // The -wal first: a fresh database must never find (and replay) the old one's log.
        for suffix in ["-wal", "-shm", ""] where exists(path + suffix) {
            guard rename(path + suffix, target + suffix) == 0 else {
                throw failure("cannot move \(path + suffix) aside to \(target + suffix)")
            }
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        try syncDirectory(directory.isEmpty ? "/" : directory)
        return target
    }

    /// Makes the directory's entries (created or renamed files) durable.
    static func syncDirectory(_ path: String) throws(StoreError) {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open \(path)") }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw failure("cannot sync \(path)") }
    }
}
