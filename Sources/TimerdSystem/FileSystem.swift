import Glibc

/// Paths and files: the few file-system calls the daemon and client make.
public enum FileSystem {
    /// The whole content of the file at `path`, read until end of file (so /proc files, whose
    /// size is reported as 0, work too).
    ///
    /// The corresponding C functions are `open` and `read`.
    public static func readFile(_ path: String) throws(Errno) -> [UInt8] {
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { try? fd.close() }
        return try fd.readToEnd()
    }

    /// Whether something exists at `path`: following symbolic links, or (`followingLinks: false`) a name
    /// at all, a dangling symbolic link included.
    ///
    /// The corresponding C functions are `stat` and `lstat`.
    public static func fileExists(_ path: String, followingLinks: Bool = true) -> Bool {
        var info = stat()
        return (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0
    }

    /// Whether `path` is a directory (following symbolic links).
    ///
    /// The corresponding C function is `stat`.
    public static func isDirectory(_ path: String) -> Bool {
        fileType(path, followLinks: true) == S_IFDIR
    }

    /// Whether `path` itself is a socket (a symbolic link to one is not).
    ///
    /// The corresponding C function is `lstat`.
    public static func isSocket(_ path: String) -> Bool {
        fileType(path, followLinks: false) == S_IFSOCK
    }

    /// Whether `path` is a regular file (following symbolic links).
    ///
    /// The corresponding C function is `stat`.
    public static func isRegularFile(_ path: String) -> Bool {
        fileType(path, followLinks: true) == S_IFREG
    }

    /// The permission bits of `path` (e.g. 0o600), following symbolic links.
    ///
    /// The corresponding C function is `stat`.
    public static func permissions(_ path: String) throws(Errno) -> UInt32 {
        var info = stat()
        _ = try checkResult(stat(path, &info))
        return info.st_mode & 0o7777
    }

    /// The device and inode of the file `path` names now (following symbolic links), to tell whether it
    /// is still the file a descriptor was opened on (`FileDescriptor.deviceAndInode()`).
    ///
    /// The corresponding C function is `stat`.
    public static func deviceAndInode(_ path: String) throws(Errno) -> (device: UInt64, inode: UInt64) {
        var info = stat()
        _ = try retryOnInterrupt { stat(path, &info) }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// Sets the permission bits of `path`.
    ///
    /// The corresponding C function is `chmod`.
    public static func setPermissions(_ path: String, _ mode: UInt32) throws(Errno) {
        _ = try retryOnInterrupt { chmod(path, mode) }
    }

    /// Sets the group of `path` itself (not of a symbolic link's target); the owner is left alone.
    ///
    /// The corresponding C function is `fchownat` (with `AT_SYMLINK_NOFOLLOW`).
    public static func setGroup(_ path: String, _ gid: UInt32) throws(Errno) {
        _ = try retryOnInterrupt { fchownat(AT_FDCWD, path, uid_t.max, gid, AT_SYMLINK_NOFOLLOW) }
    }

    /// Replaces the file at `path` with `text` so readers see the old or the new content, never a mix:
    /// writes `path.tmp`, syncs it, renames it over `path`.
    ///
    /// The corresponding C functions are `open`, `write`, `fsync` and `rename`.
    public static func writeAtomically(_ path: String, _ text: String, permissions: UInt32 = 0o644) throws(Errno) {
        let temporary = path + ".tmp"
        let fd = try FileDescriptor.open(temporary, .writeOnly, options: [.create, .truncate], permissions: permissions)
        do {
            try fd.writeAll(text)
            _ = try retryOnInterrupt { fsync(fd.rawValue) }
            try fd.close()
        } catch {
            try? fd.close()
            _ = Glibc.unlink(temporary)
            throw error
        }
        _ = try checkResult(Glibc.rename(temporary, path))
    }

    /// Renames `source` to `target`, replacing what `target` names (not a directory).
    ///
    /// The corresponding C function is `rename`.
    public static func rename(_ source: String, to target: String) throws(Errno) {
        _ = try checkResult(Glibc.rename(source, target))
    }

    /// Creates an empty file with `permissions` (less the umask) unless something exists at `path`, a
    /// symbolic link included; whether it created one.
    ///
    /// The corresponding C function is `open` (`O_CREAT | O_EXCL`).
    @discardableResult
    public static func createIfMissing(_ path: String, permissions: UInt32) throws(Errno) -> Bool {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .writeOnly, options: .exclusiveCreate, permissions: permissions)
        } catch .fileExists {
            return false
        }
        defer { try? fd.close() }
        return true
    }

    /// The first `count` bytes of the file at `path` (fewer when it is shorter).
    ///
    /// The corresponding C functions are `open` and `read`.
    public static func readPrefix(_ path: String, count: Int) throws(Errno) -> [UInt8] {
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { try? fd.close() }
        var bytes: [UInt8] = []
        while bytes.count < count {
            let chunk = try fd.read(upToCount: count - bytes.count)
            if chunk.isEmpty { break }
            bytes += chunk
        }
        return bytes
    }

    /// Makes the entries of the directory `path` (files created, renamed or removed in it) durable.
    ///
    /// The corresponding C functions are `open` (`O_DIRECTORY`) and `fsync`.
    public static func syncDirectory(_ path: String) throws(Errno) {
        let fd = try FileDescriptor.open(path, .readOnly, options: .directory)
        defer { try? fd.close() }
        try fd.sync()
    }

    /// Removes the file at `path`.
    ///
    /// The corresponding C function is `unlink`.
    public static func unlink(_ path: String) throws(Errno) {
        _ = try checkResult(Glibc.unlink(path))
    }

    /// Creates `path` and any missing parents (`mkdir -p`). Directories created here get exactly
    /// `mode`, whatever the umask; existing ones are left as they are. Throws ENOTDIR if a
    /// component exists and is not a directory.
    ///
    /// The corresponding C functions are `mkdir` and `chmod`.
    public static func makeDirectories(_ path: String, mode: UInt32 = 0o755) throws(Errno) {
        if isDirectory(path) {
            return
        }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, mode) == 0 {
                try setPermissions(prefix, mode)
            } else {
                let error = Errno.current
                guard error == .fileExists else {
                    throw error
                }
                if !isDirectory(prefix) {
                    throw .notDirectory
                }
            }
            prefix += "/"
        }
    }

    /// The paths matching shell pattern `pattern` (`*`, `?`, `[...]`), sorted by their UTF-8
    /// bytes; empty when nothing matches. Unreadable directories are skipped.
    ///
    /// The corresponding C function is `glob`.
    public static func glob(_ pattern: String) throws(Errno) -> [String] {
        var matches = glob_t()
        defer { globfree(&matches) }
        switch Glibc.glob(pattern, 0, nil, &matches) {
        case 0:
            break
        case GLOB_NOMATCH:
            return []
        case GLOB_NOSPACE:
            throw .noMemory
        default:
            throw .permissionDenied
        }
        var paths: [String] = []
        for index in 0..<Int(matches.gl_pathc) {
            if let path = matches.gl_pathv[index] {
                paths.append(String(cString: path))
            }
        }
        return paths.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The absolute path of `path` with symbolic links, "." and ".." resolved; it must exist.
    ///
    /// The corresponding C function is `realpath`.
    public static func realPath(_ path: String) throws(Errno) -> String {
        guard let resolved = realpath(path, nil) else {
            throw Errno.current
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The directory part of `path`, like dirname(1): "/a/b" → "/a", "/a" → "/", "a" → ".",
    /// "a/b/" → "a". Pure string manipulation.
    public static func directoryName(of path: String) -> String {
        var bytes = Array(path.utf8)
        while bytes.count > 1 && bytes.last == UInt8(ascii: "/") {
            bytes.removeLast()
        }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
            return "."
        }
        var end = slash
        while end > 0 && bytes[end - 1] == UInt8(ascii: "/") {
            end -= 1
        }
        return end == 0 ? "/" : String(decoding: bytes[..<end], as: UTF8.self)
    }

    private static func fileType(_ path: String, followLinks: Bool) -> mode_t? {
        var info = stat()
        let result = followLinks ? stat(path, &info) : lstat(path, &info)
        return result == 0 ? info.st_mode & S_IFMT : nil
    }
}
