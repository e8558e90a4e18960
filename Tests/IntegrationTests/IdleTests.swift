import Foundation
import Testing

/// An idle timerd must not wake up. Nothing it does may run on libdispatch's global concurrent queue: the
/// first job a worker of that queue runs starts libdispatch's worker-pool monitor, a timer that wakes the
/// process every second from then on (docs/performance.md, "Idle wake-ups"). The workers of that queue
/// are named after it (`com.apple.root.default-qos`; Linux keeps the last 15 characters, `oot.default-qos`),
/// while the workers of timerd's serial queues end in `overcommit`. A worker stays about 5 s after its last
/// job, so one that ran anything for the requests below is still there when their replies have arrived.
/// (How often the daemon wakes is measured by `make bench`'s idle scenario, not here.)
@Suite struct IdleTests {
    @Test func requestsRunNothingOnTheGlobalConcurrentQueue() throws {
        let daemon = try Daemon(config: """
            [job "hourly"]
            every = 1h
            command = true
            """)
        do {
            let client = try Client(path: daemon.socket)
            // More than 256 jobs, so that LIST sorts the names and describes the jobs on its own queue.
            for index in 0..<300 { try client.write("ADD bulk\(index) every=1h tag=bulk command=true\n") }
            for _ in 0..<300 { #expect(try client.readLine() == "OK") }
            for request in ["LIST", "SHOW hourly", "PAUSE hourly", "RESUME hourly", "RUN hourly", "STATS",
                            "WHY hourly", "HISTORY hourly", "NOPE", "CANCEL tag=bulk"] {
                let reply = try client.request(request)
                #expect(reply.hasPrefix(request == "NOPE" ? "ERR " : "OK"), "\(request): \(reply.prefix(200))")
            }
            #expect(try eventually("the run to finish") { try daemon.show("hourly")["last_result"] as? String == "ok" })
        }  // that connection closes here; the requests below come after its close
        #expect(try daemon.send("LIST", "STATS").allSatisfy { $0.hasPrefix("OK") })
        let threads = daemonThreadNames(daemon.pid)
        #expect(!threads.isEmpty)
        #expect(threads.filter { $0.hasSuffix("-qos") }.isEmpty, "libdispatch global-queue workers in timerd: \(threads)")
    }
}

/// The names (`comm`) of the threads of process `pid`.
private func daemonThreadNames(_ pid: Int32) -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// Outside systemd timerd does not load libsystemd, nor the compression and crypto libraries it links
/// (0.6 MiB resident; docs/performance.md, "Binary size and idle memory"); under systemd it does.
@Suite struct SystemdLibraryTests {
    @Test func libsystemdIsMappedOnlyWhenSystemdIsThere() throws {
        let outside = try Daemon(environment: ["NOTIFY_SOCKET": ""], waitForReady: false)
        #expect(eventually("timerd to answer") { (try? outside.request("PING")) == "OK" })
        #expect(try outside.request("ADD hourly every=1h command=true") == "OK")
        #expect(!mappedFiles(outside.pid).contains { $0.contains("libsystemd.so") }, "\(mappedFiles(outside.pid))")
        // The same check can fail: with NOTIFY_SOCKET (the harness's), libsystemd is there.
        let notified = try Daemon()
        #expect(mappedFiles(notified.pid).contains { $0.contains("libsystemd.so") }, "\(mappedFiles(notified.pid).sorted())")
    }
}

/// The files process `pid` maps (`/proc/PID/maps`).
private func mappedFiles(_ pid: Int32) -> Set<String> {
    // Read to the end: String(contentsOfFile:) stops short on /proc files larger than a page.
    let data = FileHandle(forReadingAtPath: "/proc/\(pid)/maps")?.readDataToEndOfFile() ?? Data()
    let maps = String(decoding: data, as: UTF8.self)
    return Set(maps.split(separator: "\n").compactMap { line in
        line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(5).first.map(String.init)
    })
}
