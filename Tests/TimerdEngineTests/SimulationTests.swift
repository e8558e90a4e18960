import Testing
import TimerdCore
@testable import TimerdEngine

/// Whole scenarios in virtual time through `Simulation`, the driver behind `timerctl simulate`.
@Suite struct SimulationTests {
    static func simulate(
        _ jobs: [DeclaredJob], from: String, until: String, durations: [String: Duration] = [:],
        down: [(String, String)] = [], steps: [(String, Duration)] = [], seed: UInt64 = 0, maxRunning: Int = 64
    ) -> [Simulation.Line] {
        var options = Simulation.Options(from: T.time(from), until: T.time(until))
        options.runDurations = Dictionary(uniqueKeysWithValues: durations.map { (T.name($0.key), $0.value) })
        options.down = down.map { T.time($0.0)...T.time($0.1) }
        options.clockSteps = steps.map { (T.time($0.0), $0.1) }
        options.seed = seed
        options.maxRunning = maxRunning
        return Simulation.run(jobs: jobs, options: options)
    }

    @Test(arguments: [
        ("skip", ["00:00:10 j fire", "00:00:10 j start", "00:00:20 j fire", "00:00:20 j skip", "00:00:30 j fire", "00:00:30 j skip",
                  "00:00:35 j finish", "00:00:40 j fire", "00:00:40 j start"]),
        ("queue", ["00:00:10 j fire", "00:00:10 j start", "00:00:20 j fire", "00:00:20 j queue", "00:00:30 j fire", "00:00:30 j skip",
                   "00:00:35 j finish", "00:00:35 j start", "00:00:40 j fire", "00:00:40 j queue"]),
        ("allow", ["00:00:10 j fire", "00:00:10 j start", "00:00:20 j fire", "00:00:20 j start", "00:00:30 j fire", "00:00:30 j start",
                   "00:00:35 j finish", "00:00:40 j fire", "00:00:40 j start", "00:00:45 j finish"]),
        ("replace", ["00:00:10 j fire", "00:00:10 j start", "00:00:20 j fire", "00:00:20 j queue", "00:00:20 j finish", "00:00:20 j start",
                     "00:00:30 j fire", "00:00:30 j queue", "00:00:30 j finish", "00:00:30 j start", "00:00:40 j fire",
                     "00:00:40 j queue", "00:00:40 j finish", "00:00:40 j start"]),
    ])
    func overlapPolicies(policy: String, expected: [String]) {
        let lines = Self.simulate([T.declared("j", ["every": "10s", "overlap": policy])],
                                  from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:00:45Z", durations: ["j": .seconds(25)])
        #expect(T.events(lines).map { String($0.dropFirst(11)) } == expected)
    }

    @Test(arguments: [
        ("skip", 2, ["00:05:30 j fire"]),
        ("once", 2, ["00:05:30 j fire"]),
        ("all", 0, ["00:05:30 j fire", "00:05:30 j fire", "00:05:30 j fire"]),
    ])
    func misfirePoliciesAfterDowntime(policy: String, missed: Int, replayed: [String]) {
        let lines = Self.simulate([T.declared("j", ["every": "1m", "misfire": policy])],
                                  from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:06:00Z",
                                  down: [("2026-01-05T00:02:30Z", "2026-01-05T00:05:30Z")])
        let afterRestart = lines.drop { $0.event != "start" || $0.job != nil }
        let fires = afterRestart.filter { $0.event == "fire" && $0.at < T.time("2026-01-05T00:06:00Z") }
        #expect(T.events(Array(fires)).map { String($0.dropFirst(11)) } == replayed)
        // The fires replayed are the missed ones, oldest first; 00:05 is within misfire_grace.
        #expect(fires.last?.scheduled == T.time("2026-01-05T00:05:00Z"))
        let miss = afterRestart.first { $0.event == "miss" }
        #expect((miss?.count ?? 0) == missed)
        // The grid goes on at 00:06 as if nothing happened.
        #expect(lines.contains { $0.event == "fire" && $0.scheduled == T.time("2026-01-05T00:06:00Z") })
    }

    @Test func aChainShowsItsTriggeredRunsAfterTheirUpstream() {
        let lines = Self.simulate(
            [T.declared("a", ["every": "1h"]), T.declared("b", ["after": "a"]), T.declared("c", ["after": "b"])],
            from: "2026-01-05T00:00:00Z", until: "2026-01-05T01:30:00Z", durations: ["a": .seconds(60), "b": .seconds(30)])
        #expect(T.events(lines, ["start", "finish"]).map { String($0.dropFirst(11)) } == [
            "01:00:00 a start", "01:01:00 a finish", "01:01:00 b start", "01:01:30 b finish", "01:01:30 c start",
            "01:01:30 c finish",
        ])
    }

    @Test func aFailingJobShowsItsRetriesAndTheJobsThatFollowItsFailure() {
        var options = Simulation.Options(from: T.time("2026-01-05T00:00:00Z"), until: T.time("2026-01-05T00:30:00Z"))
        options.runResults = [T.name("a"): .failed]
        let lines = Simulation.run(
            jobs: [T.declared("a", ["in": "10m", "retries": "2", "retry_backoff": "1m"]),
                   T.declared("alert", ["after": "a", "after_result": "failure"])],
            options: options)
        #expect(T.events(lines, ["start", "retry", "finish"]).map { String($0.dropFirst(20)) } == [
            "a start", "a finish", "a retry", "a start", "a finish", "a retry", "a start", "a finish", "alert start", "alert finish",
        ])
    }

    @Test func springForwardShiftsOrSkipsTheMissingLocalTime() {
        let shift = Self.simulate([T.declared("j", ["cron": "30 2 * * *"], zone: T.berlin)],
                                  from: "2026-03-28T00:00:00Z", until: "2026-03-30T12:00:00Z")
        #expect(shift.filter { $0.event == "start" }.map(\.scheduled) ==
                [T.time("2026-03-28T01:30:00Z"), T.time("2026-03-29T01:00:00Z"), T.time("2026-03-30T00:30:00Z")])
        let skip = Self.simulate([T.declared("j", ["cron": "30 2 * * *", "dst_gap": "skip"], zone: T.berlin)],
                                 from: "2026-03-28T00:00:00Z", until: "2026-03-30T12:00:00Z")
        #expect(skip.filter { $0.event == "start" }.map(\.scheduled) ==
                [T.time("2026-03-28T01:30:00Z"), T.time("2026-03-30T00:30:00Z")])
    }

    @Test func fallBackFiresTheRepeatedHourAsAsked() {
        let both = Self.simulate([T.declared("j", ["cron": "30 2 * * *", "dst_repeat": "both"], zone: T.berlin)],
                                 from: "2026-10-24T00:00:00Z", until: "2026-10-26T12:00:00Z")
        #expect(both.filter { $0.event == "start" }.map(\.scheduled) == [
            T.time("2026-10-24T00:30:00Z"), T.time("2026-10-25T00:30:00Z"), T.time("2026-10-25T01:30:00Z"), T.time("2026-10-26T01:30:00Z"),
        ])
    }

    @Test func aClockSetBackFiresTheCalendarTimesThatComeRoundAgain() {
        let lines = Self.simulate([T.declared("j", ["cron": "0 * * * *"])], from: "2026-01-04T23:50:00Z", until: "2026-01-05T02:15:00Z",
                                  steps: [("2026-01-05T00:40:00Z", .zero - .seconds(3600))])
        #expect(lines.filter { $0.event == "start" }.map(\.at) ==
                [T.time("2026-01-05T00:00:00Z"), T.time("2026-01-05T00:00:00Z"), T.time("2026-01-05T01:00:00Z")])
        #expect(lines.contains { $0.event == "clock" && $0.reason == "clock stepped by -1h" })
    }

    @Test func jitterIsReproducibleFromTheSeed() {
        let job = [T.declared("j", ["every": "1m", "jitter": "30s"])]
        let one = Self.simulate(job, from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:30:30Z", seed: 1)
        let again = Self.simulate(job, from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:30:30Z", seed: 1)
        let other = Self.simulate(job, from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:30:30Z", seed: 2)
        #expect(one == again)
        #expect(one != other)
        #expect(one.filter { $0.event == "start" }.count == 30)
    }

    @Test func runSlotsAreSharedAcrossJobs() {
        let lines = Self.simulate([T.declared("a", ["every": "10s"]), T.declared("b", ["every": "10s"])],
                                  from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:00:12Z",
                                  durations: ["a": .seconds(1), "b": .seconds(1)], maxRunning: 1)
        #expect(T.events(lines).map { String($0.dropFirst(11)) } == [
            "00:00:10 a fire", "00:00:10 a start", "00:00:10 b fire", "00:00:10 b queue", "00:00:11 a finish", "00:00:11 b start",
            "00:00:12 b finish",
        ])
    }

    @Test func runsInFlightAreStoppedWhenTheDaemonGoesDown() {
        let lines = Self.simulate([T.declared("j", ["every": "1m"])], from: "2026-01-05T00:00:00Z", until: "2026-01-05T00:03:00Z",
                                  durations: ["j": .seconds(50)], down: [("2026-01-05T00:01:30Z", "2026-01-05T00:01:40Z")])
        let finish = lines.first { $0.event == "finish" }
        #expect(finish?.at == T.time("2026-01-05T00:01:30Z"))
        #expect(finish?.detail == "run 1 killed")
        #expect(T.events(lines, ["stop", "start"]).map { String($0.dropFirst(11)) } ==
                ["00:01:00 j start", "00:01:30 - stop", "00:01:40 - start", "00:02:00 j start", "00:03:00 j start"])
    }
}
