import Foundation
import Glibc
import Testing
import TimerdTestSupport

/// `timerd`'s own command line and how both binaries find the socket.
@Suite struct DaemonCommandLineTests {
    let timerd: String
    let timerctl: String

    init() throws {
        timerd = try Daemon.binary("timerd")
        timerctl = try Daemon.binary("timerctl")
    }

    /// Runs `timerd ARGUMENTS` with `environment` changes (nil removes a variable), reporting to a fresh
    /// notify socket in `directory`; waits for READY=1, runs `body`, then stops it by PID.
    func withTimerd(
        _ arguments: [String], environment changes: [String: String?] = [:], directory: String, _ body: () throws -> Void
    ) throws {
        let notify = try NotifySocket(path: directory + "/notify-\(UInt32.random(in: 0...UInt32.max))")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: timerd)
        // A state directory of its own, so no test daemon restores another's jobs.
        process.arguments = arguments + ["--state-dir", directory + "/state-\(UInt32.random(in: 0...UInt32.max))"]
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in changes { environment[key] = value }
        environment["NOTIFY_SOCKET"] = notify.path
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            // Its stderr is not kept: under make test-tsan/test-asan a sanitizer report shows as this status.
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "timerd's exit status after SIGTERM")
        }
        #expect(notify.waitFor("READY=1", timeout: 20))
        try body()
    }

    @Test func versionHelpAndUsageErrors() throws {
        let version = try Daemon.run(timerd, ["--version"])
        #expect(version.status == 0)
        #expect(version.stdout == "timerd 0.1.0 (protocol 1)\n")
        let help = try Daemon.run(timerd, ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("Usage: timerd [--socket PATH] [--config PATH] [--state-dir PATH] [--check-config]"))
        #expect(help.stderr.isEmpty)
        let bogus = try Daemon.run(timerd, ["--bogus"])
        #expect(bogus.status == 2)
        #expect(bogus.stderr == "timerd: error: unknown option --bogus\nSee 'timerd --help'.\n")
        // An option cut short or misspelt gets the one it was probably meant to be.
        let short = try Daemon.run(timerd, ["--check"])
        #expect(short.status == 2)
        #expect(short.stderr == "timerd: error: unknown option --check (did you mean --check-config?)\nSee 'timerd --help'.\n")
        let typo = try Daemon.run(timerd, ["--confg=/etc/timerd.conf"])
        #expect(typo.stderr.hasPrefix("timerd: error: unknown option --confg=/etc/timerd.conf (did you mean --config?)\n"))
        let missing = try Daemon.run(timerd, ["--socket"])
        #expect(missing.status == 2)
        #expect(missing.stderr.hasPrefix("timerd: error: --socket needs a value"))
    }

    @Test func theBinariesComeFromTimerdTestBinDirWhenItIsSet() throws {
        // `make test` sets it to .build/release; plain `swift test` leaves it unset (the bundle's directory).
        let expected = ProcessInfo.processInfo.environment["TIMERD_TEST_BIN_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            ?? TestBinaries.bundleDirectory
        #expect(timerd == expected + "/timerd" || timerd == FileManager.default.currentDirectoryPath + "/" + expected + "/timerd")
        #expect(try Daemon.run(timerd, ["--version"]).status == 0)
    }

    @Test func aMissingBinaryFailsTheTestNamingTheDirectory() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: MissingBinary.self) {
            try TestBinaries.executable("timerd", in: directory, from: "TIMERD_TEST_BIN_DIR")
        }
        #expect(error?.description.hasPrefix("\(directory)/timerd is missing or not executable (directory from TIMERD_TEST_BIN_DIR)") == true,
                "\(String(describing: error))")
        // A directory of that name is not the binary either.
        try FileManager.default.createDirectory(atPath: directory + "/timerd", withIntermediateDirectories: false)
        #expect(throws: MissingBinary.self) { try TestBinaries.executable("timerd", in: directory, from: "TIMERD_TEST_BIN_DIR") }
    }

    @Test func bothBinariesHonourTimerdSocket() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/from-env.sock"
        // An explicit --config that does not exist is an error; write an empty one.
        _ = FileManager.default.createFile(atPath: directory + "/empty.conf", contents: Data())
        try withTimerd(["--config", directory + "/empty.conf"], environment: ["TIMERD_SOCKET": socket], directory: directory) {
            #expect(FileManager.default.fileExists(atPath: socket))
            let ping = try Daemon.run(timerctl, ["ping"], environment: ["TIMERD_SOCKET": socket])
            #expect(ping.status == 0)
            #expect(ping.stdout == "pong\n")
        }
    }

    @Test func configSocketIsUsedWithoutFlagOrEnvironment() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "[daemon]\nsocket = relative.sock\n".write(toFile: directory + "/timerd.conf", atomically: true, encoding: .utf8)
        try withTimerd(["--config", directory + "/timerd.conf"], environment: ["TIMERD_SOCKET": nil], directory: directory) {
            // Relative to the config file's directory.
            let ping = try Daemon.run(timerctl, ["--socket", directory + "/relative.sock", "ping"])
            #expect(ping.status == 0)
        }
    }

    @Test func aRelativeSocketPathGetsItsPermissionsSet() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = FileManager.default.createFile(atPath: directory + "/empty.conf", contents: Data())
        // `--socket t.sock` from the directory it is in: bound relative to timerd's working directory, and
        // found there again to be given its mode (it was left as bind made it, with a warning).
        let notify = try NotifySocket(path: directory + "/notify.sock")
        let log = directory + "/timerd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: timerd)
        process.arguments = ["--socket", "t.sock", "--config", "empty.conf", "--state-dir", "state"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        process.environment = environment
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        #expect(notify.waitFor("READY=1", timeout: 20))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: directory + "/t.sock")[.posixPermissions] as? Int)
        #expect(mode == 0o600 || mode == 0o660, "mode \(String(mode, radix: 8))")
        // The ready line follows READY=1 (log lines are written by a queue of their own).
        eventually("the ready line") { (try? String(contentsOfFile: log, encoding: .utf8))?.contains("listening on t.sock") == true }
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(!text.contains("control socket: cannot find its file"), "\(text)")
    }

    @Test func aSecondDaemonOnTheSameSocketIsRefused() throws {
        let daemon = try Daemon()
        // A state directory in the first one's test directory: timerd opens its state before it binds, and
        // without --state-dir that would be the host's /var/lib/timerd (as root).
        let second = try Daemon.run(timerd, ["--socket", daemon.socket, "--config", daemon.directory + "/absent.conf",
                                             "--state-dir", daemon.directory + "/second-state"])
        #expect(second.status == 1)
        #expect(second.stderr.contains("another timerd is listening on \(daemon.socket)") || second.stderr.contains(daemon.socket))
        #expect(try daemon.request("PING") == "OK", "the first one is unharmed")
    }

    @Test func aStaleSocketFileIsReplaced() throws {
        let first = try Daemon()
        let socket = first.socket
        // SIGKILL leaves the socket file behind.
        #expect(first.stop(signal: SIGKILL) == SIGKILL)
        #expect(FileManager.default.fileExists(atPath: socket))
        try withTimerd(["--socket", socket, "--config", first.directory + "/absent.conf"], directory: first.directory) {
            let reply = try Client(path: socket).request("PING")
            #expect(reply == "OK")
        }
    }
}
