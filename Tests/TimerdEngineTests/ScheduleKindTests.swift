import Testing
import TimerdCore
@testable import TimerdEngine

/// Every kind of schedule and the policies that apply to a single fire, on the manual clock and in
/// virtual time.
@Suite struct ScheduleKindTests {
    static func simulate(_ jobs: [DeclaredJob], from: String, until: String, down: [(String, String)] = []) -> [Simulation.Line] {
        var options = Simulation.Options(from: T.time(from), until: T.time(until))
        options.down = down.map { T.time($0.0)...T.time($0.1) }
        return Simulation.run(jobs: jobs, options: options)
    }

    @Test func anAtJobFiresOnceAtItsTimeOnTheWallClock() {
        var driver = Driver(at: "2026-01-05T00:00:00Z")
        #expect(driver.add("once", ["at": "2026-01-05T00:00:30Z"]) == .success(.done))
        #expect(driver.armed.map(\.1) == [.wall(T.time("2026-01-05T00:00:30Z"))])
        driver.reach("once", after: .seconds(30))
        #expect(driver.starts.map(\.scheduled) == [T.time("2026-01-05T00:00:30Z")])
        #expect(driver.engine.job(T.name("once"))?.state == .finished)
        #expect(driver.effects.contains { if case .disarm = $0 { return true } else { return false } })
    }

    @Test func anInJobCountsFromWhenItWasAdded() {
        var driver = Driver()
        let start = driver.clock.now()
        _ = driver.add("soon", ["in": "90s"])
        #expect(driver.armed.map(\.1) == [.mono(start.mono + .seconds(90))])
        driver.reach("soon", after: .seconds(90))
        #expect(driver.starts.count == 1)
        #expect(driver.engine.job(T.name("soon"))?.state == .finished)
    }

    @Test func aSystemdCalendarSkipsTheTimeASpringForwardRemoves() throws {
        // systemd's rule: 02:30 does not exist on 29 March in Berlin, so that day has no fire.
        let spec = T.spec("j", ["calendar": "*-*-* 02:30"])
        let job = DeclaredJob(spec: spec, file: "t.conf", line: 1, civil: T.civil(spec, zone: T.berlin))
        let lines = Self.simulate([job], from: "2026-03-28T00:00:00Z", until: "2026-03-30T12:00:00Z")
        #expect(lines.filter { $0.event == "start" }.map(\.scheduled) == [T.time("2026-03-28T01:30:00Z"), T.time("2026-03-30T00:30:00Z")])
    }

    @Test func aFireHandledBeyondTheGraceIsSkippedWithMisfireSkip() {
        var driver = Driver()
        _ = driver.add("strict", ["every": "1h", "misfire_grace": "1s"])
        // The timer is 5 s late (a starved daemon, a suspended machine): beyond the grace, not run.
        driver.reach("strict", after: .seconds(3_605))
        #expect(driver.starts.isEmpty)
        #expect(driver.decisions.contains(.skipped(T.name("strict"), scheduled: driver.clock.wallNow + .seconds(-5), count: 1,
                                                   reason: "handled 5s late, beyond misfire_grace=1s (misfire=skip)")))
        // With misfire=once the same late fire runs.
        _ = driver.add("lenient", ["every": "1h", "misfire_grace": "1s", "misfire": "once"])
        driver.reach("lenient", after: .seconds(3_605))
        #expect(driver.starts.count == 1)
        #expect(driver.starts.first?.lateness == .seconds(5))
    }

    @Test func rebootJobsFireOnlyWhenTheDaemonStarts() {
        var driver = Driver()
        let reboot = T.spec("boot", ["cron": "@reboot"])
        driver.handle(.reload([DeclaredJob(spec: reboot, file: "t.conf", line: 1, civil: nil)], maxRunning: 4))
        #expect(driver.armed.count == 1, "armed for now, at start-up")
        // Added at run time instead: refused, they belong in the config.
        #expect(driver.add("late", ["cron": "@reboot"])?.code == .badArgument)
        // A reload does not fire it again.
        let changed = T.spec("boot", ["cron": "@reboot", "command": "echo again"])
        driver.handle(.reload([DeclaredJob(spec: changed, file: "t.conf", line: 1, civil: nil)], maxRunning: 4))
        #expect(driver.engine.job(T.name("boot"))?.state == .finished)
    }

    @Test func aReloadKeepsUnchangedJobsReArmsChangedOnesAndRemovesTheRest() {
        var driver = Driver()
        let keep = T.declared("keep", ["every": "1h"]), change = T.declared("change", ["every": "1h"]), drop = T.declared("drop", ["every": "1h"])
        driver.handle(.reload([keep, change, drop], maxRunning: 4))
        let kept = driver.engine.job(T.name("keep"))!
        driver.handle(.pause([T.name("keep")], by: T.root, checkOnly: false))
        driver.handle(.reload([keep, T.declared("change", ["every": "2h"])], maxRunning: 8))
        #expect(driver.engine.job(T.name("keep")) === kept)
        #expect(driver.engine.job(T.name("keep"))?.state == .paused)
        #expect(driver.engine.job(T.name("change"))?.spec.schedule == .every(interval: .seconds(7_200), start: nil))
        #expect(driver.engine.job(T.name("drop")) == nil)
        #expect(driver.engine.settings.maxRunning == 8)
        // A runtime job's name in the config: refused whole.
        _ = driver.add("mine", ["every": "1h"])
        driver.handle(.reload([T.declared("mine", ["every": "1h"])], maxRunning: 8))
        #expect(driver.reply?.code == .invalidConfig)
        #expect(driver.engine.job(T.name("keep")) != nil, "nothing changed")
    }

    /// The table's index of tags (`CANCEL tag=T`, `LIST tag=T`) follows every job in and out, and a
    /// config job whose tags a reload changes.
    @Test func theJobsOfATagAreFoundThroughEveryChange() {
        var driver = Driver()
        driver.handle(.reload([T.declared("conf", ["every": "1h", "tag": "old"])], maxRunning: 4))
        _ = driver.add("a", ["every": "1h", "tag": "t"])
        _ = driver.add("b", ["every": "1h", "tag": "t"])
        _ = driver.add("c", ["every": "1h"])
        #expect(driver.engine.names(withTag: "t") == [T.name("a"), T.name("b")])
        #expect(driver.engine.names(withTag: "old") == [T.name("conf")])
        driver.handle(.cancel([T.name("a")], by: T.root, checkOnly: false))
        #expect(driver.engine.names(withTag: "t") == [T.name("b")])
        driver.handle(.reload([T.declared("conf", ["every": "1h", "tag": "new"])], maxRunning: 4))
        #expect(driver.engine.names(withTag: "old") == [])
        #expect(driver.engine.names(withTag: "new") == [T.name("conf")])
        driver.handle(.reload([], maxRunning: 4))
        #expect(driver.engine.names(withTag: "new") == [])
        #expect(driver.engine.names(withTag: "t") == [T.name("b")])
    }

    @Test func newZoneRulesMoveACalendarJobsNextFire() {
        var driver = Driver(at: "2026-01-05T00:00:00Z")
        let spec = T.spec("daily", ["cron": "0 9 * * *"])
        driver.handle(.add(AddJob(spec: spec, origin: .runtime, owner: T.root, civil: T.civil(spec))))
        #expect(driver.armed.map(\.1) == [.wall(T.time("2026-01-05T09:00:00Z"))])
        driver.handle(.zonesChanged([spec.name: T.civil(spec, zone: T.berlin)!]))
        #expect(driver.armed.map(\.1) == [.wall(T.time("2026-01-05T08:00:00Z"))])
    }

    @Test func aHeldFireRunsOnceWhenTheModeReturnsInVirtualTime() {
        var driver = Driver()
        _ = driver.add("web", ["every": "10s", "modes": "default"])
        _ = driver.add("always", ["every": "10s", "modes": "common"])
        driver.handle(.switchMode("maintenance"))
        for _ in 0..<3 {
            driver.clock.advance(by: .seconds(10))
            for name in ["web", "always"] {
                let job = driver.engine.job(T.name(name))!
                driver.handle(.deadlineReached(job.name, jobID: job.id))
                for start in driver.starts { driver.finish(start) }
            }
        }
        #expect(driver.engine.job(T.name("always"))?.runs == 3, "common jobs run in every mode")
        #expect(driver.engine.job(T.name("web"))?.runs == 0)
        #expect(driver.engine.job(T.name("web"))?.skipped == 2, "one fire held, the later ones skipped")
        driver.handle(.switchMode("default"))
        #expect(driver.starts.map(\.job) == [T.name("web")])
    }

    @Test func aLastFireStoredAHairBeforeItsGridPointIsNotMissedAgain() {
        // The last fire was the 00:02:00 grid point, stored 1 µs early (converted between the clocks);
        // restarted at 00:02:00.5 nothing fell due since.
        let spec = T.spec("g", ["every": "1m", "misfire": "all"])
        var state = RestoredState()
        state.jobs = [RestoredJob(
            stored: StoredJobState(name: spec.name, options: spec.options, paused: false, runs: 2, addedAt: T.time("2026-01-05T00:00:00Z"),
                                   lastScheduled: T.time("2026-01-05T00:01:59.999999Z"), anchor: T.time("2026-01-05T00:01:00Z"),
                                   ownerUID: 0, shared: false),
            spec: spec, civil: nil)]
        var driver = Driver(at: "2026-01-05T00:02:00.5Z")
        driver.handle(.restore(state))
        #expect(driver.starts.isEmpty)
        #expect(driver.engine.job(spec.name)?.skipped == 0)
        #expect(driver.armed.map(\.1) == [.mono(driver.clock.monotonicNow + .milliseconds(59_500))])
    }

    @Test func aGridJobStoresItsFireWithoutJitter() {
        var driver = Driver(at: "2026-01-05T00:00:00Z")
        _ = driver.add("j", ["every": "1m", "jitter": "20s"])
        driver.reach("j", after: .seconds(80))
        let job = driver.engine.job(T.name("j"))!
        #expect(job.lastScheduledWall == T.time("2026-01-05T00:01:00Z"))
    }

    @Test func aPausedJobMissesItsFiresAcrossARestartAndStaysPaused() {
        let spec = T.spec("p", ["every": "1m", "misfire": "all"])
        var state = RestoredState()
        state.jobs = [RestoredJob(
            stored: StoredJobState(name: spec.name, options: spec.options, paused: true, runs: 2, addedAt: T.time("2026-01-05T00:00:00Z"),
                                   lastScheduled: T.time("2026-01-05T00:02:00Z"), anchor: T.time("2026-01-05T00:01:00Z"), ownerUID: 0,
                                   shared: false),
            spec: spec, civil: nil)]
        var driver = Driver(at: "2026-01-05T00:10:30Z")
        driver.handle(.restore(state))
        #expect(driver.starts.isEmpty)
        #expect(driver.armed.isEmpty)
        #expect(driver.engine.job(spec.name)?.state == .paused)
        #expect(driver.engine.job(spec.name)?.skipped == 8)
    }
}
