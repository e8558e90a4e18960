import Foundation
import Glibc
import Testing
import TimerdSystem

/// Jobs that die with their owner, tags, and modes, against the real daemon.
@Suite struct OwnerTagModeTests {
    // MARK: - Owners

    @Test func aJobBoundToAProcessGoesWhenItIsKilled() throws {
        let daemon = try Daemon()
        let owner = Process()
        owner.executableURL = URL(fileURLWithPath: "/bin/sleep")
        owner.arguments = ["300"]
        try owner.run()
        let pid = owner.processIdentifier
        #expect(try daemon.request("ADD helper every=1h owner=pid:\(pid) command=true") == "OK")
        #expect(try daemon.show("helper")["owner"] as? String == "pid:\(pid)")
        kill(pid, SIGKILL)
        let killed = Date()
        var gone: Date?
        while Date().timeIntervalSince(killed) < 5 {
            if try daemon.request("SHOW helper").hasPrefix("ERR no-such-job") { gone = Date(); break }
            usleep(1_000)
        }
        owner.waitUntilExit()
        let elapsed = try #require(gone).timeIntervalSince(killed)
        #expect(elapsed < 0.1, "gone \(Int(elapsed * 1000)) ms after the kill")
        #expect(daemon.logShows("job=helper cancelled: its owner process \(pid) exited"))
        #expect(try daemon.request("ADD late every=1h owner=pid:\(pid) command=true").hasPrefix("ERR bad-argument owner: no process"))
        #expect(try daemon.request("ADD bad every=1h owner=pid:abc command=true").hasPrefix("ERR bad-argument "))
    }

    @Test(.enabled(if: getuid() == 0 || ProcessInfo.processInfo.environment["CI"] == "true",
                   "needs root for a private PID namespace (to recycle a PID on purpose)"))
    func aRecycledPidDoesNotKeepAJobAlive() throws {
        // timerd runs in its own PID namespace, where the test can make the kernel hand a dead owner's PID
        // to a new process (ns_last_pid) and check the job still went with the first one.
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/timerd.sock"
        _ = FileManager.default.createFile(atPath: directory + "/none.conf", contents: Data())
        let namespace = Process()
        namespace.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        namespace.arguments = try ["--pid", "--fork", "--mount-proc", "--kill-child", Daemon.binary("timerd"), "--socket", socket,
                               "--config", directory + "/none.conf", "--state-dir", directory + "/state"]
        namespace.standardError = FileHandle.nullDevice
        try namespace.run()
        defer {
            kill(namespace.processIdentifier, SIGKILL)
            namespace.waitUntilExit()
        }
        eventually("timerd up") { (try? Client(path: socket).request("PING")) == "OK" }
        // The host PID of timerd (PID 1 inside): the only child of unshare.
        let children = (try? String(contentsOfFile: "/proc/\(namespace.processIdentifier)/task/\(namespace.processIdentifier)/children", encoding: .utf8)) ?? ""
        let timerdHostPID = try #require(Int32(children.split(separator: " ").first ?? ""))
        // Output goes to a file, not a pipe: the backgrounded owner would hold a pipe open.
        func inside(_ script: String) throws -> String {
            let output = directory + "/inside.out"
            let fd = try FileDescriptor.open(output, .writeOnly, options: [.create, .truncate])
            defer { try? fd.close() }
            // Spawn (clone + exec), not Foundation's Process: its exit watching missed nsenter's exit here.
            let child = try Spawn.run(
                program: "/usr/bin/nsenter", arguments: ["-t", String(timerdHostPID), "-p", "-m", "/bin/sh", "-c", script],
                environment: ["PATH": "/usr/bin:/bin"], output: fd)
            _ = try child.waitExit(blocking: true)
            try? child.pidfd.close()
            return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        // Owner A inside the namespace, under a subshell that reaps it (timerd is PID 1 there and, like any
        // daemon that is not an init, does not reap strangers: an unreaped A would keep its PID).
        _ = try inside("(sleep 300 & echo $! > \(directory)/pidA; wait) >/dev/null 2>&1 &")
        eventually("A started") { FileManager.default.fileExists(atPath: directory + "/pidA") && !((try? String(contentsOfFile: directory + "/pidA", encoding: .utf8)) ?? "").isEmpty }
        let pidA = try #require(Int32(try String(contentsOfFile: directory + "/pidA", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(try Client(path: socket).request("ADD bound every=1h owner=pid:\(pidA) command=true") == "OK")
        _ = try inside("kill -9 \(pidA)")
        eventually("job gone with A") { (try? Client(path: socket).request("SHOW bound"))?.hasPrefix("ERR no-such-job") == true }
        // B gets A's PID; a job bound to A's PID again must not be confused by B... and B's job is B's.
        let pidB = try #require(Int32(try inside("echo \(pidA - 1) > /proc/sys/kernel/ns_last_pid; sleep 300 >/dev/null 2>&1 & echo $!").trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(pidB == pidA, "the kernel recycled the PID")
        #expect(try Client(path: socket).request("ADD rebound every=1h owner=pid:\(pidB) command=true") == "OK")
        _ = try inside("kill -9 \(pidB)")
        eventually("job gone with B") { (try? Client(path: socket).request("SHOW rebound"))?.hasPrefix("ERR no-such-job") == true }
    }

    @Test func aJobBoundToItsConnectionGoesWhenTheClientLeaves() throws {
        let daemon = try Daemon()
        do {
            let client = try Client(path: daemon.socket)
            #expect(try client.request("ADD mine every=1h owner=connection command=true") == "OK")
            #expect(try daemon.show("mine")["owner"] as? String == "connection")
        }  // the client closes here
        try eventually("gone with its connection") { try daemon.request("SHOW mine").hasPrefix("ERR no-such-job") }
        // The log is written by its own queue, a moment after the cancel.
        #expect(eventually("logged") { daemon.log.contains("job=mine cancelled: the control connection that added it (owner=connection) closed") })
    }

    @Test func aJobBoundToItsConnectionGoesWhenTheClientIsKilled() throws {
        let daemon = try Daemon()
        // A separate process holds the connection; SIGKILL gives it no chance to close politely.
        let script = """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b"ADD held every=1h owner=connection command=true\\n")
            print(s.recv(100).decode().strip(), flush=True)
            time.sleep(300)
            """
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        client.arguments = ["python3", "-c", script, daemon.socket]
        let out = Pipe()
        client.standardOutput = out
        try client.run()
        let line = String(decoding: out.fileHandleForReading.availableDataBlocking(), as: UTF8.self)
        #expect(line.hasPrefix("OK"))
        #expect(try daemon.show("held")["owner"] as? String == "connection")
        kill(client.processIdentifier, SIGKILL)
        client.waitUntilExit()
        try eventually("gone with the killed client") { try daemon.request("SHOW held").hasPrefix("ERR no-such-job") }
    }

    @Test func configJobsCannotHaveAnOwner() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let path = directory + "/t.conf"
        try "[job \"x\"]\nevery = 1h\ncommand = true\nowner = connection\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try Daemon.run(Daemon.binary("timerd"), ["--check-config", "--config", path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("t.conf:4: owner applies only to jobs added over the control socket"))
    }

    // MARK: - Tags

    @Test func tagOperationsOnAThousandJobs() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)
        var lines = ""
        for index in 0..<1000 { lines += "ADD bulk\(index) every=1h tag=bulk tag=n\(index % 2) command=true\n" }
        lines += "ADD other every=1h command=true\n"
        try client.write(lines)
        for _ in 0..<1001 { #expect(try client.readLine() == "OK") }
        let paused = try client.request("PAUSE tag=bulk")
        #expect(paused.hasPrefix(#"OK {"jobs":["bulk0","bulk1","bulk10","#))
        let list = try client.request("LIST tag=bulk")
        let infos = try JSONSerialization.jsonObject(with: Data(list.dropFirst(3).utf8)) as! [[String: Any]]
        #expect(infos.count == 1000)
        #expect(infos.allSatisfy { $0["state"] as? String == "paused" })
        #expect(try daemon.show("other")["state"] as? String == "scheduled")
        #expect(try client.request("RESUME tag=n0").hasPrefix("OK {\"jobs\":["))
        #expect(try daemon.show("bulk2")["state"] as? String == "scheduled")
        #expect(try daemon.show("bulk3")["state"] as? String == "paused")
        #expect(try client.request("CANCEL tag=bulk").hasPrefix("OK {\"jobs\":["))
        #expect(try client.request("LIST") .contains("\"name\":\"other\""))
        #expect(try client.request("LIST tag=bulk") == "OK []")
        #expect(try client.request("PAUSE tag=nothing") == #"OK {"jobs":[]}"#)
        #expect(try client.request("PAUSE other tag=bulk").hasPrefix("ERR bad-argument "))
        #expect(try client.request("PAUSE tag='bad tag'").hasPrefix("ERR bad-argument "))
    }

    @Test func pausingATagStopsItsFiresAtOnce() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socket)
        var lines = ""
        for index in 0..<50 {
            lines += "ADD t\(index) every=20ms tag=fast command='echo x >> \(daemon.directory)/t\(index)'\n"
        }
        try client.write(lines)
        for _ in 0..<50 { #expect(try client.readLine() == "OK") }
        eventually("all fired") { (0..<50).allSatisfy { !daemon.lines("t\($0)").isEmpty } }
        #expect(try client.request("PAUSE tag=fast").hasPrefix("OK"))
        // Runs already started may still finish; wait until none is running, then take the counts.
        try eventually("runs drained") { try (0..<50).allSatisfy { try daemon.show("t\($0)")["running"] as? Int == 0 } }
        let counts = (0..<50).map { daemon.lines("t\($0)").count }
        #expect(try daemon.request("ADD witness every=20ms count=5 command='echo x >> \(daemon.directory)/w'") == "OK")
        eventually("witness ran") { daemon.lines("w").count == 5 }
        #expect((0..<50).map { daemon.lines("t\($0)").count } == counts, "no paused job fired")
    }

    // MARK: - Modes

    @Test func jobsOutsideTheModeHoldOneFireAndFireOnceWhenItReturns() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("MODE") == #"OK {"held":[],"mode":"default"}"#)
        #expect(try daemon.request("ADD normal every=30ms command='echo x >> \(daemon.directory)/normal'") == "OK")
        #expect(try daemon.request("ADD always every=30ms modes=common,maintenance command='echo x >> \(daemon.directory)/always'") == "OK")
        eventually("both run") { daemon.lines("normal").count >= 1 && daemon.lines("always").count >= 1 }
        let switched = try daemon.request("MODE maintenance")
        #expect(switched.hasPrefix(#"OK {"held":"#) && switched.contains(#""mode":"maintenance""#) && switched.contains(#""previous":"default""#))
        try eventually("normal holds a fire") { try daemon.show("normal")["held_since"] is String }
        try eventually("no run going") { try daemon.show("normal")["running"] as? Int == 0 }
        let before = daemon.lines("normal").count
        let alwaysBefore = daemon.lines("always").count
        eventually("the common job keeps running") { daemon.lines("always").count >= alwaysBefore + 4 }
        #expect(daemon.lines("normal").count == before, "held while in maintenance")
        let held = try daemon.request("MODE")
        #expect(held.contains(#""name":"normal""#) && held.contains(#""mode":"maintenance""#))
        // Back to default: the held fire runs once (not one per missed interval).
        let back = try daemon.request("MODE default")
        #expect(back.contains(#""released":["normal"]"#))
        eventually("released fire ran") { daemon.lines("normal").count >= before + 1 }
        #expect(daemon.lines("normal").count <= before + 2, "one fire, not a burst")
        #expect(try daemon.show("normal")["held_since"] is NSNull)
        #expect(try daemon.show("normal")["skipped"] as? Int ?? 0 >= 1, "further fires while held were skipped, with a reason")
        #expect(try daemon.request("MODE 'bad mode'").hasPrefix("ERR bad-argument "))
    }

    @Test func theModeSurvivesAReload() throws {
        let daemon = try Daemon(config: "[job \"c\"]\nevery = 1h\nmodes = maintenance\ncommand = true\n")
        #expect(try daemon.show("c")["modes"] as? [String] == ["maintenance"])
        #expect(try daemon.request("MODE maintenance").hasPrefix("OK"))
        #expect(try daemon.request("RELOAD").hasPrefix("OK"))
        #expect(try daemon.request("MODE").contains(#""mode":"maintenance""#))
    }
}

extension FileHandle {
    /// Reads until at least one byte (or EOF) is available.
    func availableDataBlocking() -> Data {
        var data = Data()
        while !data.contains(UInt8(ascii: "\n")) {
            let chunk = availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        return data
    }
}
