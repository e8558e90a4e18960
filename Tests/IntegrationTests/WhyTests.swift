import Foundation
import Glibc
import Testing

/// `WHY` through the real daemon: each due fire and what became of it, updated as its run ends, and
/// still there after a restart.
@Suite struct WhyTests {
    static func fires(_ daemon: Daemon, _ name: String, limit: Int = 10) throws -> [[String: Any]] {
        let reply = try daemon.request("WHY \(name) limit=\(limit)")
        guard reply.hasPrefix("OK ") else { throw HarnessError("WHY \(name): \(reply)") }
        return try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as! [[String: Any]]
    }

    @Test func eachDueFireSaysWhatBecameOfItAcrossARestart() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let state = directory + "/state"
        let release = directory + "/release"
        var first: Daemon? = try Daemon(stateDirectory: state)
        let daemon = first!
        // Its first run lasts until the test creates the file: the fires meanwhile are skipped (overlap=skip).
        #expect(try daemon.request(
            "ADD slow every=100ms command='while [ ! -e \(release) ]; do sleep 0.02; done; echo $TIMERD_RUN >> \(directory)/runs'") == "OK")
        try eventually("two fires skipped behind run 1") {
            try Self.fires(daemon, "slow").filter { $0["outcome"] as? String == "skipped" }.count >= 2
        }
        var fires = try Self.fires(daemon, "slow", limit: 50)
        let ran = try #require(fires.last)
        #expect(ran["outcome"] as? String == "ran" && ran["run"] as? Int == 1, "\(fires)")
        #expect(ran["result"] == nil, "still running: no result yet")
        #expect(ran["lateness_ms"] is Double)
        let skipped = try #require(fires.first { $0["outcome"] as? String == "skipped" })
        #expect(skipped["reason"] as? String == "run 1 is still going (overlap=skip)")
        #expect(skipped["run"] == nil)
        // Newest first, on the job's 100 ms grid.
        let times = try fires.map { try seconds(#require($0["scheduled"] as? String)) }
        #expect(times == times.sorted(by: >))

        _ = FileManager.default.createFile(atPath: release, contents: nil)
        try eventually("run 1's fire shows its result") {
            try Self.fires(daemon, "slow", limit: 50).last { $0["run"] as? Int == 1 }?["result"] as? String == "ok"
        }
        #expect(try daemon.request("PAUSE slow") == "OK")
        fires = try Self.fires(daemon, "slow", limit: 50)
        #expect(try daemon.request("WHY slow limit=0").hasPrefix("ERR bad-argument"))
        #expect(try daemon.request("WHY nope").hasPrefix("ERR no-such-job"))
        daemon.stop()
        first = nil

        let again = try Daemon(stateDirectory: state)
        let kept = try Self.fires(again, "slow", limit: 50)
        // The records from before the stop are all there; the fires that fell due while timerd was
        // stopped come first, as missed (the job is paused: none of them runs).
        let old = Array(kept.suffix(fires.count))
        #expect(old.map { $0["outcome"] as? String } == fires.map { $0["outcome"] as? String })
        #expect(old.map { $0["scheduled"] as? String } == fires.map { $0["scheduled"] as? String })
        let newest = try seconds(#require(fires.first?["scheduled"] as? String))
        for fire in kept.dropLast(fires.count) {
            #expect(fire["outcome"] as? String == "missed", "\(fire)")
            #expect(try seconds(#require(fire["scheduled"] as? String)) > newest, "\(fire)")
        }
        // timerctl prints them as a table, newest first.
        let table = try again.ctl("why", "slow", "--last", "3")
        #expect(table.status == 0)
        #expect(table.stdout.hasPrefix("SCHEDULED"))
        #expect(table.stdout.split(separator: "\n").count == 4, "\(table.stdout)")
    }
}
