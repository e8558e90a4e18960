import Foundation
import Testing

/// Workflows over runs (issue #21): what a run of failures does to a job, through the release timerd.
@Suite struct WorkflowTests {
    @Test func failedRunsInARowPauseTheJobAndSaySoUntilItIsResumed() throws {
        let daemon = try Daemon()
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        let flag = daemon.directory + "/fixed"
        // Fails until the file exists.
        #expect(try daemon.request("ADD flaky every=50ms pause_after_failures=3 command='test -e \(flag)'") == "OK")
        var paused: [String: Any] = [:]
        while paused.isEmpty {
            let event = try WatchTests.event(try watcher.readLine())
            if event["job"] as? String == "flaky", event["event"] as? String == "paused" { paused = event }
        }
        let reason = "paused after 3 failed runs in a row (pause_after_failures=3); RESUME it once the cause is fixed"
        #expect(paused["reason"] as? String == reason)
        let info = try daemon.show("flaky")
        #expect(info["state"] as? String == "paused")
        #expect(info["paused_reason"] as? String == reason)
        #expect(info["runs"] as? Int == 3)
        #expect(try daemon.ctl("show", "flaky").stdout.contains("state:       paused (\(reason))"))
        #expect(daemon.logShows("job=flaky \(reason)"))
        // WHY says it with the run that paused it (once its record is written, behind the run's end).
        var why = ""
        try eventually("WHY has the pausing run") {
            why = try daemon.ctl("why", "flaky").stdout
            return why.contains("the job was paused after 3 failed runs in a row")
        }

        // Fixed and resumed: it runs again, and the reason is gone.
        _ = FileManager.default.createFile(atPath: flag, contents: nil)
        #expect(try daemon.request("RESUME flaky") == "OK")
        try eventually("an ok run") { try daemon.show("flaky")["last_result"] as? String == "ok" }
        let resumed = try daemon.show("flaky")
        #expect(resumed["state"] as? String == "scheduled" && resumed["paused_reason"] is NSNull)
        #expect(try daemon.request("CANCEL flaky") == "OK")
    }
}
