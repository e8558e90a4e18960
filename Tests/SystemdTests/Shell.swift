import Foundation
import Glibc
import Testing

/// What a finished command left behind.
struct CommandResult: CustomStringConvertible {
    var command: [String]
    var status: Int32
    var stdout: String
    var stderr: String

    var succeeded: Bool { status == 0 }
    var description: String {
        "`\(command.joined(separator: " "))` exited \(status)\n  stdout: \(stdout.trimmed)\n  stderr: \(stderr.trimmed)"
    }
}

struct TestbedError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension StringProtocol {
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}

enum Shell {
    /// Runs a program (looked up on `PATH` if not absolute), bounded by `timeout` seconds through
    /// coreutils' `timeout` so a hung command cannot hang the suite. Both pipes are read to EOF before
    /// waiting, so a chatty child cannot block on a full pipe.
    static func run(_ command: [String], timeout: Double = 60) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["--kill-after=5", String(format: "%.1f", timeout)] + command
        var environment = ProcessInfo.processInfo.environment
        environment["SYSTEMD_PAGER"] = ""
        environment["SYSTEMD_COLORS"] = "0"
        environment["LC_ALL"] = "C.UTF-8"
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let group = DispatchGroup()
        nonisolated(unsafe) var stdout = Data()
        group.enter()
        DispatchQueue.global().async {
            stdout = out.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return CommandResult(
            command: command, status: process.terminationStatus,
            stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Like `run`, but a non-zero exit is an error carrying the command's output.
    @discardableResult
    static func check(_ command: [String], timeout: Double = 60) throws -> CommandResult {
        let result = try run(command, timeout: timeout)
        guard result.succeeded else { throw TestbedError("command failed: \(result)") }
        return result
    }

    /// Finds a program on `PATH` (or checks an absolute path); nil if it is not there.
    static func which(_ name: String) -> String? {
        if name.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
        for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        return nil
    }
}

/// Waits for `condition` to hold, checking every 50 ms, for at most `timeout` seconds. This waits on an
/// observable condition, never a fixed delay; the timeout only bounds a failing test. Records an issue
/// (naming `what`) when it times out.
@discardableResult
func eventually(timeout: Double = 10, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
                _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    let ok = try condition()
    if !ok { Issue.record("timed out after \(timeout)s waiting for \(what)", sourceLocation: sourceLocation) }
    return ok
}

/// Like `eventually`, without recording an issue: for the test bed's own set-up and tear-down.
func waitUntil(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}
