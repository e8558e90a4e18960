import CTimerdSys
import Glibc

/// A cgroup v2 directory and the interface files timerd uses: `cgroup.procs` (who is in it, and moving a
/// process in), `cgroup.kill` (SIGKILL to everything in it, Linux 5.14), `cgroup.events` (`populated`),
/// `cpu.stat` (CPU time, present without the cpu controller) and the limit files of delegated
/// controllers (`memory.max`, …). A value: the directory need not exist.
public struct CgroupDirectory: Sendable, Hashable, CustomStringConvertible {
    public let path: String
    /// Where its files are opened from, if not from `path`: an ancestor's directory, kept open by whoever
    /// made this value, and the path below it. Each component of a path is a lookup in the cgroup file
    /// system, under its lock.
    private let base: (directory: FileDescriptor, below: String)?

    public init(path: String) {
        self.path = path
        base = nil
    }

    private init(path: String, base: (directory: FileDescriptor, below: String)) {
        self.path = path
        self.base = base
    }

    public static func == (lhs: CgroupDirectory, rhs: CgroupDirectory) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }

    public var description: String { path }

    public func child(_ name: String) -> CgroupDirectory {
        CgroupDirectory(path: path + "/" + name)
    }

    /// Child `name`, its files opened from `opened`, this directory open (which must stay open while the
    /// child is used).
    public func child(_ name: String, opened: FileDescriptor) -> CgroupDirectory {
        CgroupDirectory(path: path + "/" + name, base: (opened, name))
    }

    /// Opens its file (or itself, "") `name`.
    private func openFile(_ name: String, _ access: FileDescriptor.AccessMode,
                          options: FileDescriptor.OpenOptions = []) throws(Errno) -> FileDescriptor {
        guard let base else { return try FileDescriptor.open(name.isEmpty ? path : path + "/" + name, access, options: options) }
        return try FileDescriptor.open(name.isEmpty ? base.below : base.below + "/" + name, in: base.directory, access, options: options)
    }

    /// Whether the directory exists.
    public var exists: Bool { FileSystem.isDirectory(path) }

    /// Creates it (the kernel fills it with its interface files). EEXIST when it exists.
    ///
    /// The corresponding C functions are `mkdir` and `mkdirat`.
    public func create() throws(Errno) {
        let made = base.map { mkdirat($0.directory.rawValue, $0.below, 0o755) } ?? mkdir(path, 0o755)
        guard made == 0 else { throw Errno.current }
    }

    /// Removes it, which the kernel allows only once nothing is in it and it has no children (EBUSY).
    ///
    /// The corresponding C functions are `rmdir` and `unlinkat`.
    public func remove() throws(Errno) {
        let removed = base.map { unlinkat($0.directory.rawValue, $0.below, AT_REMOVEDIR) } ?? rmdir(path)
        guard removed == 0 else { throw Errno.current }
    }

    /// The directory opened for `Spawn.start(cgroup:)` (clone3's `CLONE_INTO_CGROUP`).
    public func open() throws(Errno) -> FileDescriptor {
        try openFile("", .readOnly, options: .directory)
    }

    /// The processes in it (not in its children).
    public func processes() throws(Errno) -> [Int32] {
        try lines("cgroup.procs").compactMap { Int32($0) }
    }

    /// Moves process `pid` into it.
    public func move(_ pid: Int32) throws(Errno) {
        try write("cgroup.procs", String(pid))
    }

    /// SIGKILL to every process in it and its children, atomically with respect to forks.
    public func kill() throws(Errno) {
        try write("cgroup.kill", "1")
    }

    /// Sends `signal` to every process in it and its children, as `cgroup.procs` lists them (a process
    /// forked meanwhile may be missed: for the end, `kill`).
    public func signalAll(_ signal: Signal) {
        var seen = Set<Int32>()
        for directory in [self] + descendants() {
            for pid in (try? directory.processes()) ?? [] where seen.insert(pid).inserted {
                _ = Glibc.kill(pid, signal.rawValue)
            }
        }
    }

    /// Whether any process is in it or its children (`cgroup.events`: `populated`).
    public func isPopulated() throws(Errno) -> Bool {
        try number("populated", in: "cgroup.events") != 0
    }

    /// CPU time used by everything that ran in it (`cpu.stat`: `usage_usec`), or nil.
    public func cpuUsage() -> Duration? {
        guard let micros = try? number("usage_usec", in: "cpu.stat") else { return nil }
        return .microseconds(micros)
    }

    /// The most memory everything in it used at once (`memory.peak`, with the memory controller, Linux
    /// 5.19), or nil.
    public func memoryPeak() -> Int64? {
        guard let text = try? lines("memory.peak").first else { return nil }
        return Int64(text)
    }

    /// `memory.peak` opened and reset for this reader (Linux 6.12; before, the file cannot be written):
    /// what `Self.peak(_:)` reads through it is the most memory in use at once since the reset.
    public func openResetPeak() throws(Errno) -> FileDescriptor {
        let fd = try openFile("memory.peak", .readWrite)
        do {
            try fd.writeAll("reset\n")
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// The peak `memory.peak` opened by `openResetPeak` says (read from its start), or nil.
    ///
    /// The corresponding C function is `pread`.
    public static func peak(_ file: FileDescriptor) -> Int64? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(file.rawValue, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int64(String(decoding: buffer[..<count].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self))
    }

    /// Bytes read and written by everything in it, over every device (`io.stat`'s `rbytes` and `wbytes`,
    /// with the io controller), or nil.
    public func ioBytes() -> (read: Int64, written: Int64)? {
        guard has("io.stat"), let devices = try? lines("io.stat") else { return nil }
        var read: Int64 = 0, written: Int64 = 0
        for device in devices {
            // MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N
            for field in device.split(separator: " ").dropFirst() {
                let pair = field.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, let value = Int64(pair[1]) else { continue }
                if pair[0] == "rbytes" { read += value } else if pair[0] == "wbytes" { written += value }
            }
        }
        return (read, written)
    }

    /// Whether it has the interface file `name`.
    ///
    /// The corresponding C function is `faccessat`.
    public func has(_ name: String) -> Bool {
        guard let base else { return FileSystem.fileExists(path + "/" + name) }
        return faccessat(base.directory.rawValue, base.below + "/" + name, F_OK, 0) == 0
    }

    /// Its child cgroups, deepest first (so they can be removed in this order).
    public func descendants() -> [CgroupDirectory] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var found: [CgroupDirectory] = []
        while let entry = readdir(directory) {
            guard entry.pointee.d_type == UInt8(DT_DIR) else { continue }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name != ".", name != ".." else { continue }
            let child = child(name)
            found += child.descendants() + [child]
        }
        return found
    }

    /// Writes `text` to the interface file `name`.
    public func write(_ name: String, _ text: String) throws(Errno) {
        let fd = try openFile(name, .writeOnly)
        defer { try? fd.close() }
        try fd.writeAll(text)
    }

    /// The interface file `name`, a line each.
    public func lines(_ name: String) throws(Errno) -> [String] {
        let fd = try openFile(name, .readOnly)
        defer { try? fd.close() }
        return String(decoding: try fd.readToEnd(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }

    /// The value of `key` in the flat-keyed interface file `name` (`key value` lines, as `cpu.stat` and
    /// `cgroup.events`), or nil when it has no such line or its value is not a whole number.
    ///
    /// Read into a buffer on the stack and scanned where it lies: a run's end reads two of these, and
    /// making each into a dictionary of strings was two fifths of their cost on the loop's thread
    /// (docs/performance.md, "Fire to command (round 18)"). One read: the kernel hands out a cgroup file's
    /// whole text at once, and the files read so are under 400 bytes.
    public func number(_ key: String, in name: String) throws(Errno) -> Int64? {
        let fd = try openFile(name, .readOnly)
        defer { try? fd.close() }
        var failure: Errno?
        let value = withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { buffer -> Int64? in
            do throws(Errno) {
                let count = try fd.read(into: buffer)
                return Self.number(key, in: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            } catch {
                failure = error
                return nil
            }
        }
        if let failure { throw failure }
        return value
    }

    /// The value of `key` in `text` (`key value` lines), or nil.
    static func number(_ key: String, in text: UnsafeRawBufferPointer) -> Int64? {
        var key = key
        return key.withUTF8 { key -> Int64? in
            var start = 0
            while start < text.count {
                let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
                let line = text[start..<end]
                start = end + 1
                guard line.count > key.count, line[line.startIndex + key.count] == UInt8(ascii: " "),
                      line.starts(with: key) else { continue }
                let digits = line[(line.startIndex + key.count + 1)...]
                guard !digits.isEmpty, digits.count <= 18 else { return nil }
                var value: Int64 = 0
                for byte in digits {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                    value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                }
                return value
            }
            return nil
        }
    }
}

/// Where this process sits in the cgroup v2 hierarchy.
public enum CgroupHierarchy {
    /// The directory of the cgroup v2 hierarchy a process in `cgroupPath` (the `0::` line of
    /// `/proc/PID/cgroup`) is in, from `/proc/PID/mountinfo` text: the first `cgroup2` mount whose root
    /// contains that path. Nil when there is none.
    public static func directory(mountinfo: String, cgroupFile: String) -> CgroupDirectory? {
        guard let own = unifiedPath(cgroupFile: cgroupFile) else { return nil }
        for line in mountinfo.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: " ").map(String.init)
            guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, fields[dash + 1] == "cgroup2",
                  fields.count > 4 else { continue }
            let root = unescape(fields[3]), mountPoint = unescape(fields[4])
            let relative: String
            if root == "/" {
                relative = own
            } else if own == root || own.hasPrefix(root + "/") {
                relative = String(own.dropFirst(root.count))
            } else {
                continue
            }
            let base = mountPoint == "/" ? "" : mountPoint
            let path = relative == "/" || relative.isEmpty ? (base.isEmpty ? "/" : base) : base + relative
            return CgroupDirectory(path: path)
        }
        return nil
    }

    /// The path of the `0::` line, or nil.
    public static func unifiedPath(cgroupFile: String) -> String? {
        for line in cgroupFile.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }

    /// Whether `cgroupFile`'s process is in the hierarchy's root cgroup.
    public static func isRoot(cgroupFile: String) -> Bool {
        unifiedPath(cgroupFile: cgroupFile) == "/"
    }

    /// This process's cgroup v2 directory, from its `/proc/self` files; nil without a cgroup v2 mount.
    public static func own() -> (directory: CgroupDirectory?, path: String?) {
        let mountinfo = (try? FileSystem.readFile("/proc/self/mountinfo")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let cgroups = (try? FileSystem.readFile("/proc/self/cgroup")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return (directory(mountinfo: mountinfo, cgroupFile: cgroups), unifiedPath(cgroupFile: cgroups))
    }

    /// mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
    static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.first {
            if byte == UInt8(ascii: "\\"), utf8.count >= 4,
               let value = UInt8(String(decoding: utf8.dropFirst().prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(4)
            } else {
                bytes.append(byte)
                utf8 = utf8.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
