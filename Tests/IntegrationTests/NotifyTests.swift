import Foundation
import Glibc
import Testing

/// What timerd tells the service manager, observed on a test-owned NOTIFY_SOCKET (the real systemd is in
/// SystemdTests).
@Suite struct NotifyTests {
    @Test func readyCarriesAStatusLineThatFollowsTheJobs() throws {
        let daemon = try Daemon(config: """
            [job "hello"]
            every = 1h
            command = true
            """)
        let ready = try #require(daemon.notify.received.first { $0.contains("READY=1") })
        #expect(ready.contains("STATUS=1 job, 0 running, next: hello at "))
        #expect(try daemon.request("ADD other in=30m command=true") == "OK")
        #expect(daemon.notify.waitFor("STATUS=2 jobs, 0 running, next: other at", prefix: true, timeout: 10))
    }

    @Test func reloadIsAnnouncedAndFollowedByReady() throws {
        let daemon = try Daemon(config: "[job \"a\"]\nevery = 1h\ncommand = true\n")
        #expect(try daemon.request("RELOAD").hasPrefix("OK"))
        #expect(daemon.notify.waitFor("RELOADING=1", timeout: 10))
        let reloading = try #require(daemon.notify.received.last { $0.contains("RELOADING=1") })
        let monotonic = try #require(reloading.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") })
        #expect(UInt64(monotonic.dropFirst("MONOTONIC_USEC=".count)) ?? 0 > 0)
        #expect(daemon.notify.waitFor("READY=1", timeout: 10))
        // A rejected reload still ends with READY=1: the daemon goes on with the old config.
        try "[job \"a\"]\nevery = soon\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        #expect(try daemon.request("RELOAD").hasPrefix("ERR invalid-config"))
        #expect(daemon.notify.waitFor("RELOADING=1", timeout: 10))
        #expect(daemon.notify.waitFor("READY=1", timeout: 10))
        #expect(daemon.notify.received.last?.contains("STATUS=reload rejected") == true)
    }

    @Test func stopAnnouncesStoppingAndAsksForTimeWhileJobsRun() throws {
        let daemon = try Daemon(config: "[daemon]\nstop_grace = 30s\n")
        let gate = daemon.directory + "/gate"
        #expect(try daemon.request("ADD w in=10ms command='while [ ! -e \(gate) ]; do sleep 0.01; done'") == "OK")
        try eventually("running") { try daemon.show("w")["running"] as? Int == 1 }
        kill(daemon.process.processIdentifier, SIGTERM)
        #expect(daemon.notify.waitFor("STOPPING=1", timeout: 10))
        #expect(daemon.notify.waitFor("EXTEND_TIMEOUT_USEC=35000000", timeout: 10))
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
    }

    @Test func watchdogPingsFromTheRegistryAndStopsWhenItIsWedged() throws {
        let daemon = try Daemon(environment: ["WATCHDOG_USEC": "200000", "TIMERD_TEST_FAILPOINTS": "wedge-registry-on-usr1"])
        #expect(daemon.notify.waitFor("WATCHDOG=1", timeout: 10))
        #expect(daemon.notify.waitFor("WATCHDOG=1", timeout: 10), "pings repeat")
        kill(daemon.process.processIdentifier, SIGUSR1)
        eventually("wedged") { daemon.log.contains("failpoint wedge-registry-on-usr1") }
        // Drain what was already sent, then no ping may come for several intervals (100 ms each).
        _ = daemon.notify.waitFor("never", timeout: 0.3)
        #expect(!daemon.notify.waitFor("WATCHDOG=1", timeout: 1.0), "a wedged registry sends no pings")
        #expect(daemon.stop(signal: SIGKILL) == SIGKILL)
    }

    @Test func withoutTheFailpointUsr1IsNotSpecial() throws {
        let daemon = try Daemon()
        kill(daemon.process.processIdentifier, SIGUSR1)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationReason == .uncaughtSignal)
        #expect(!daemon.log.contains("failpoint"))
    }

    @Test func socketActivationUsesThePassedSocketAndLeavesItsFile() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate), "systemd-socket-activate (package systemd) is needed")
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/activated.sock"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: activate)
        // systemd-socket-activate binds the socket, waits for the first client, then execs timerd with it.
        process.arguments = try ["-l", socket, Daemon.binary("timerd"), "--socket", directory + "/unused.sock",
                             "--config", directory + "/none.conf", "--state-dir", directory + "/state"]
        _ = FileManager.default.createFile(atPath: directory + "/none.conf", contents: Data())
        let log = directory + "/log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        eventually("socket bound") { FileManager.default.fileExists(atPath: socket) }
        // The client connects before timerd runs: it is served once timerd starts.
        #expect(try Client(path: socket).request("PING") == "OK")
        #expect(!FileManager.default.fileExists(atPath: directory + "/unused.sock"), "timerd did not bind its own")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(FileManager.default.fileExists(atPath: socket), "timerd never removes a socket it did not create")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(text.contains("listening on socket passed by systemd (fd 3)"))
    }
}

@Suite struct SecondSignalTests {
    @Test func aSecondSigtermKillsTheRemainingRunsAtOnce() throws {
        let daemon = try Daemon(config: "[daemon]\nstop_grace = 5min\n")
        let pids = daemon.directory + "/pids"
        #expect(try daemon.request("ADD long in=10ms command='sleep 300 & echo $! > \(pids); wait'") == "OK")
        eventually("running") { daemon.lines("pids").count == 1 }
        let grandchild = try #require(Int32(daemon.lines("pids")[0]))
        kill(daemon.process.processIdentifier, SIGTERM)
        #expect(daemon.notify.waitFor("STOPPING=1", timeout: 10))
        #expect(daemon.process.isRunning, "the first SIGTERM waits for the run (grace 5min)")
        kill(daemon.process.processIdentifier, SIGTERM)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
        eventually("the run's process group was killed") { !isRunning(grandchild) }
        #expect(daemon.logShows("again while stopping: killing the remaining runs now"))
    }
}
