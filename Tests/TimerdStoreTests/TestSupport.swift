import Glibc
import Testing
import TimerdCore
@testable import TimerdStore

/// A fresh directory under /tmp, removed (with everything in it) by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/timerd-store-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StoreError("mkdtemp failed") }
        path = String(cString: made)
    }

    init(path: String) { self.path = path }

    func remove() { Self.removeTree(path) }

    static func removeTree(_ path: String) {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
                }
                if name == "." || name == ".." { continue }
                removeTree(path + "/" + name)
            }
            closedir(dir)
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    /// The names in the directory, sorted.
    func entries() -> [String] {
        var names: [String] = []
        guard let dir = opendir(path) else { return [] }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        return names.sorted()
    }
}

func writeBytes(_ path: String, _ bytes: [UInt8], at offset: Int? = nil) throws {
    let fd = offset == nil ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600) : open(path, O_WRONLY)
    guard fd >= 0 else { throw StoreError("open \(path) failed") }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset ?? 0)) }
    guard written == bytes.count else { throw StoreError("write \(path) failed") }
}

func readBytes(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw StoreError("open \(path) failed") }
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { break }
        result += buffer[0..<count]
    }
    return result
}

func fileMode(_ path: String) -> UInt32 {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
}

/// A small deterministic generator (a 64-bit LCG's high bits): the same bytes and the same "random"
/// changes on every run, so a failure can be replayed.
struct Deterministic {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15

    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state >> 33
    }

    /// A number in 0..<bound.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// Deterministic bytes that are not a database.
func garbage(_ count: Int) -> [UInt8] {
    var random = Deterministic()
    return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
}

let t0 = WallTime(seconds: 1_795_000_000, nanoseconds: 123_456_789)

func job(_ name: String, options: [KeyValue] = [KeyValue("every", "5m"), KeyValue("command", "true")]) -> StoredJob {
    StoredJob(name: name, options: options, addedAt: t0)
}

func run(_ job: String, _ number: Int, result: String = "ok") -> StoredRun {
    StoredRun(
        job: job, run: number, scheduledAt: t0 + .seconds(number), startedAt: t0 + .seconds(number),
        endedAt: t0 + .seconds(number) + .milliseconds(5), result: result, exitCode: 0, output: "run \(number)\n")
}

/// Waits for `condition` to hold, checking every 2 ms, for at most `timeout` seconds: it waits on what the
/// test observes (the store's health, its counters), never a fixed delay; the timeout only bounds a
/// failing test. Returns whether it held.
@discardableResult
func eventually(timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicSeconds() + timeout
    while monotonicSeconds() < deadline {
        if try condition() { return true }
        usleep(2_000)
    }
    return try condition()
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Runs `argv` (argv[0] an absolute path) with posix_spawn, its output discarded, and waits for it;
/// returns its exit status (-1 when it could not be started or was killed).
@discardableResult
func runCommand(_ argv: [String]) -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var arguments = argv.map { strdup($0) }
    arguments.append(nil)
    defer { for argument in arguments { free(argument) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, argv[0], &actions, nil, arguments, environ) == 0 else { return -1 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS, which Swift does not import.
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : -1
}

/// A tmpfs mounted (as root) at `<directory>/fs`, unmounted by `unmount()`, lazily when it is busy.
struct TemporaryMount {
    let path: String

    init(in directory: TemporaryDirectory, size: String) throws {
        path = directory.path + "/fs"
        guard mkdir(path, 0o700) == 0 else { throw StoreError("mkdir \(path) failed") }
        guard runCommand(["/bin/mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path]) == 0 else {
            throw StoreError("mount -t tmpfs at \(path) failed")
        }
    }

    /// `mount -o remount,<options>`; whether it worked (a remount read-only fails while a file on it is
    /// open for writing: EBUSY).
    @discardableResult
    func remount(_ options: String) -> Bool {
        runCommand(["/bin/mount", "-o", "remount,\(options)", path]) == 0
    }

    func unmount() {
        if runCommand(["/bin/umount", path]) != 0 { runCommand(["/bin/umount", "-l", path]) }
    }
}

let isRoot = geteuid() == 0
