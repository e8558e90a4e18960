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
