import TimerdCore
import TimerdSystem

/// The few file-system calls the store makes around SQLite, through TimerdSystem's wrappers.
enum Files {
    private static func failure(_ what: String, _ error: Errno) -> StoreError { .system(what, error) }

    /// Creates `path` and its missing parents with mode 0700; fine when it is already a directory.
    static func makeDirectories(_ path: String) throws(StoreError) {
        guard !path.isEmpty else { throw StoreError("the state directory is empty") }
        do {
            try FileSystem.makeDirectories(path, mode: 0o700)
        } catch .notDirectory {
            // The path is wrong, not the disk.
            throw StoreError("cannot create \(path): \(Errno.notDirectory)")
        } catch {
            throw failure("cannot create \(path)", error)
        }
        guard FileSystem.fileExists(path) else { throw StoreError("cannot use \(path)") }
        guard FileSystem.isDirectory(path) else { throw StoreError("\(path) is not a directory") }
    }

    /// Whether anything, a dangling symbolic link included, has the name `path`.
    static func exists(_ path: String) -> Bool { FileSystem.fileExists(path, followingLinks: false) }

    /// The first `count` bytes of the file (fewer when it is shorter).
    static func prefix(_ path: String, count: Int) throws(StoreError) -> [UInt8] {
        do {
            return try FileSystem.readPrefix(path, count: count)
        } catch {
            throw failure("cannot read \(path)", error)
        }
    }

    /// Creates an empty file with `mode` unless something exists at `path` (SQLite gives its -wal and
    /// -shm files the mode of the database file).
    static func createIfMissing(_ path: String, mode: UInt32) throws(StoreError) {
        do {
            try FileSystem.createIfMissing(path, permissions: mode)
        } catch {
            throw failure("cannot create \(path)", error)
        }
    }

    /// Renames `path` (and its `-wal` and `-shm`) to `path.corrupt-<UTC time>`, with `-2`, `-3` … added
    /// when that name is taken; returns the new name of `path`.
    static func moveAside(_ path: String) throws(StoreError) -> String {
        // 2026-11-29T16:00:00.000000Z → 20261129T160000Z
        let now = RFC3339.format(WallTime(seconds: SystemClock.wallClockNow().seconds))
        let stamp = String(now.prefix(19).filter { $0 != "-" && $0 != ":" }) + "Z"
        let base = "\(path).corrupt-\(stamp)"
        var target = base
        var attempt = 1
        while ["", "-wal", "-shm"].contains(where: { exists(target + $0) }) {
            attempt += 1
            target = "\(base)-\(attempt)"
        }
        // The -wal first: a fresh database must never find (and replay) the old one's log.
        for suffix in ["-wal", "-shm", ""] where exists(path + suffix) {
            do {
                try FileSystem.rename(path + suffix, to: target + suffix)
            } catch {
                throw failure("cannot move \(path + suffix) aside to \(target + suffix)", error)
            }
        }
        try syncDirectory(FileSystem.directoryName(of: path))
        return target
    }

    /// Makes the directory's entries (created or renamed files) durable.
    static func syncDirectory(_ path: String) throws(StoreError) {
        do {
            try FileSystem.syncDirectory(path)
        } catch {
            throw failure("cannot sync \(path)", error)
        }
    }
}

/// A read-only descriptor on the database file, and which file it is: the store compares the path with
/// it before each transaction, since SQLite would go on writing to a removed or replaced file, and all of
/// it would be gone at the next start. Held open, it also keeps the inode's number from being reused by a
/// new file at the path. Read-only, it does not keep the file system from being remounted read-only.
final class PinnedFile {
    private let descriptor: FileDescriptor
    let device: UInt64
    let inode: UInt64

    /// Opens `path` read-only. Throws a storage fault naming `path`.
    init(_ path: String) throws(StoreError) {
        do {
            descriptor = try FileDescriptor.open(path, .readOnly)
        } catch {
            throw .system("cannot open \(path)", error)
        }
        do {
            (device, inode) = try descriptor.deviceAndInode()
        } catch {
            try? descriptor.close()
            throw .system("cannot stat \(path)", error)
        }
    }

    deinit { try? descriptor.close() }

    /// Whether `path` names this file now (one `stat`); false when it names nothing or cannot be checked.
    func isAt(_ path: String) -> Bool {
        guard let now = try? FileSystem.deviceAndInode(path) else { return false }
        return now == (device, inode)
    }

    /// Throws the storage fault "`path` was removed" or "… was replaced by another file" unless `path`
    /// still names this file.
    func check(_ path: String) throws(StoreError) {
        let now: (device: UInt64, inode: UInt64)
        do {
            now = try FileSystem.deviceAndInode(path)
        } catch .noSuchFileOrDirectory {
            throw .fault("\(path) was removed: writes to it would be lost", reason: "\(path) was removed")
        } catch {
            throw .system("cannot check \(path)", error)
        }
        guard now == (device, inode) else {
            throw .fault(
                "\(path) was replaced by another file: writes to the old one would be lost",
                reason: "\(path) was replaced by another file")
        }
    }
}
