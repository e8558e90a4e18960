import Glibc
import Testing
import TimerdSystem

/// A fresh directory under /tmp, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/timerd-sys-test-XXXXXX".utf8CString)
        let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let result else {
            throw Errno(rawValue: errno)
        }
        path = String(cString: result)
    }

    func remove() {
        _ = try? run("/bin/rm", ["-rf", path])
    }
}

/// Writes `text` to a new file at `path`.
func writeFile(_ path: String, _ text: String) throws {
    let fd = try FileDescriptor.open(path, .writeOnly, options: [.create, .truncate])
    defer { try? fd.close() }
    try fd.writeAll(text)
}

/// The result of running a command to completion.
struct Finished {
    var output: String
    var status: TerminationStatus
}

/// Runs a command with the given environment, collects its output to end of file, waits on
/// its pidfd and reaps it.
func run(
    _ program: String, _ arguments: [String] = [],
    environment: [String: String] = ["PATH": "/usr/bin:/bin"],
    workingDirectory: String? = nil,
    credentials: Credentials? = nil
) throws -> Finished {
    let pipe = try FileDescriptor.makePipe()
    defer { try? pipe.read.close() }
    let child: ChildProcess
    do {
        child = try Spawn.run(
            program: program, arguments: arguments, environment: environment,
            workingDirectory: workingDirectory, credentials: credentials, output: pipe.write)
    } catch {
        try? pipe.write.close()
        throw error
    }
    try pipe.write.close()
    defer { try? child.pidfd.close() }
    let output = try pipe.read.readToEnd()
    #expect(try child.pidfd.waitReadable())
    let status = try #require(try child.waitExit())
    return Finished(output: String(decoding: output, as: UTF8.self), status: status)
}

/// Reads one line (without its newline) from a blocking descriptor, byte by byte.
func readLine(_ fd: FileDescriptor) throws -> String {
    var bytes: [UInt8] = []
    while true {
        let byte = try fd.read(upToCount: 1)
        if byte.isEmpty || byte[0] == UInt8(ascii: "\n") {
            return String(decoding: bytes, as: UTF8.self)
        }
        bytes.append(byte[0])
    }
}

/// The value of `field` ("SigBlk") in /proc/<pid>/status.
func procStatusField(_ pid: String, _ field: String) throws -> String? {
    let text = String(decoding: try FileSystem.readFile("/proc/\(pid)/status"), as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return line.dropFirst(field.count + 1).trimmingPrefix(while: { $0 == " " || $0 == "\t" }).description
    }
    return nil
}

/// Kills the child's process group and reaps the child.
func killAndReap(_ child: ChildProcess) throws -> TerminationStatus? {
    _ = try child.signalGroup(.kill)
    defer { try? child.pidfd.close() }
    return try child.waitExit(blocking: true)
}
