import Foundation
import Testing

@Suite struct StatsTests {
    @Test func statsCountJobsRunsLatenessAndRequests() throws {
        let daemon = try Daemon()
        // overlap=allow: under load a run may outlast 20ms, and a skipped fire would be one more sample.
        #expect(try daemon.request("ADD ok every=20ms count=5 overlap=allow command=true") == "OK")
        #expect(try daemon.request("ADD bad in=10ms command='exit 2'") == "OK")
        #expect(try daemon.request("ADD later every=1h command=true") == "OK")
        #expect(try daemon.request("PAUSE later") == "OK")
        try eventually("runs done") {
            try daemon.show("ok")["state"] as? String == "finished" && daemon.show("ok")["running"] as? Int == 0
                && daemon.show("bad")["last_result"] as? String == "failed"
        }
        let reply = try daemon.request("STATS")
        #expect(reply.hasPrefix("OK {"))
        let stats = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as! [String: Any]
        #expect(stats["jobs"] as? [String: Int] == ["scheduled": 0, "paused": 1, "finished": 2, "waiting": 0])
        #expect(stats["runs"] as? [String: Int] == ["ok": 5, "failed": 1, "timeout": 0, "killed": 0])
        #expect(stats["running"] as? Int == 0)
        let lateness = try #require(stats["lateness_ms"] as? [String: Any])
        #expect(lateness["samples"] as? Int == 6, "one per scheduled fire")
        #expect((lateness["p50"] as? Double ?? -1) >= 0)
        #expect((lateness["max"] as? Double ?? -1) >= (lateness["p99"] as? Double ?? 0))
        let exec = try #require(stats["exec_ms"] as? [String: Any])
        #expect(exec["samples"] as? Int == 6)
        #expect((stats["requests"] as? Int ?? 0) >= 5)
        #expect((stats["rss_bytes"] as? Int ?? 0) > 1_000_000)
        #expect((stats["uptime_seconds"] as? Double ?? -1) > 0)
        #expect(stats["mode"] as? String == "default")
        // Started by this test, timerd shares the test's cgroup (or the root one): not its own to divide.
        let tracking = try #require(stats["run_tracking"] as? [String: String])
        #expect(tracking["by"] == "process-group", "\(tracking)")
        #expect(tracking["reason"]?.isEmpty == false)
        #expect(daemon.logShows("runs: tracked by process group, not by cgroup: "))
        let text = try daemon.ctl("stats")
        #expect(text.stdout.contains("runs in:    process groups (not cgroups: "), "\(text.stdout)")
        #expect(try daemon.request("STATS x").hasPrefix("ERR bad-argument "))
    }
}
