import Testing
@testable import TimerdCore

@Suite("Schedule and FireGrid")
struct ScheduleTests {
    @Test("summary", arguments: [
        (Schedule.every(interval: .seconds(5), start: nil), "every 5s"),
        (.every(interval: .seconds(60), start: .seconds(10)), "every 1m (start 10s)"),
        (.every(interval: .seconds(90), start: .zero), "every 1m30s (start 0s)"),
        (.every(interval: .milliseconds(10), start: nil), "every 10ms"),
        (.every(interval: .seconds(86_400 + 7_200), start: .milliseconds(1_500)), "every 1d2h (start 1s500ms)"),
        (.after(delay: .seconds(30)), "in 30s"),
        (.after(delay: .zero), "in 0s"),
        (.after(delay: .seconds(3_600)), "in 1h"),
        (.at(WallTime(seconds: 1_795_968_000)), "at 2026-11-29T16:00:00.000000Z"),
        (.at(WallTime(nanosecondsSinceEpoch: -1)), "at 1969-12-31T23:59:59.999999Z"),
    ])
    func summary(schedule: Schedule, text: String) {
        #expect(schedule.summary == text)
    }

    @Test("repeats only for every")
    func repeats() {
        #expect(Schedule.every(interval: .seconds(1), start: nil).repeats)
        #expect(Schedule.every(interval: .seconds(1), start: .zero).repeats)
        #expect(!Schedule.after(delay: .seconds(1)).repeats)
        #expect(!Schedule.at(WallTime(seconds: 0)).repeats)
    }

    @Test("schedules compare by case and payload")
    func equality() {
        #expect(Schedule.every(interval: .seconds(1), start: nil) != .every(interval: .seconds(1), start: .zero))
        #expect(Schedule.after(delay: .seconds(1)) != .every(interval: .seconds(1), start: nil))
        #expect(Schedule.at(WallTime(seconds: 1)) == .at(WallTime(nanosecondsSinceEpoch: 1_000_000_000)))
    }

    // MARK: - FireGrid

    @Test("instants are first + k·interval")
    func instants() {
        let grid = FireGrid(first: 1_000, interval: .nanoseconds(250))
        #expect(grid.first == 1_000)
        #expect(grid.interval == 250)
        #expect((0..<5).map { grid.instant($0) } == [1_000, 1_250, 1_500, 1_750, 2_000])
    }

    /// (time, index(after:), index(atOrBefore:)) for first = 1000, interval = 100.
    static let gridTable: [(UInt64, UInt64, UInt64?)] = [
        (0, 0, nil),
        (999, 0, nil),
        (1_000, 1, 0),  // exactly on the first point: "after" is strictly after
        (1_001, 1, 0),
        (1_099, 1, 0),
        (1_100, 2, 1),
        (1_101, 2, 1),
        (1_199, 2, 1),
        (1_200, 3, 2),
        (100_999, 1_000, 999),
        (101_000, 1_001, 1_000),
    ]

    @Test("index(after:) and index(atOrBefore:)", arguments: gridTable)
    func indexes(time: UInt64, after: UInt64, atOrBefore: UInt64?) {
        let grid = FireGrid(first: 1_000, interval: .nanoseconds(100))
        #expect(grid.index(after: time) == after)
        #expect(grid.index(atOrBefore: time) == atOrBefore)
    }

    @Test("index laws hold for random grids and times", arguments: [21, 22, 23] as [UInt64])
    func laws(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<5_000 {
            let first = UInt64.random(in: 0...(1 << 50), using: &rng)
            let interval = Int64.random(in: 10_000_000...(86_400 * nsPerSecond), using: &rng)
            let grid = FireGrid(first: first, interval: .nanoseconds(interval))
            let time = UInt64.random(in: 0...(1 << 52), using: &rng)
            let next = grid.index(after: time)
            #expect(grid.instant(next) > time)
            if next > 0 { #expect(grid.instant(next - 1) <= time) }
            if let last = grid.index(atOrBefore: time) {
                #expect(grid.instant(last) <= time)
                #expect(grid.instant(last + 1) > time)
                #expect(next == last + 1)
            } else {
                #expect(time < first)
                #expect(next == 0)
            }
        }
    }

    @Test("huge indexes and late instants")
    func huge() {
        // A 10 ms grid starting at an uptime of 1 day, asked about a time ~58 years later.
        let interval: UInt64 = 10_000_000
        let first: UInt64 = 86_400 * 1_000_000_000
        let grid = FireGrid(first: first, interval: .milliseconds(10))
        let k: UInt64 = 184_467_440_000  // ~ 58 years of 10 ms ticks
        let point = first + k * interval
        #expect(grid.instant(k) == point)
        #expect(grid.index(atOrBefore: point) == k)
        #expect(grid.index(after: point) == k + 1)
        #expect(grid.index(atOrBefore: point - 1) == k - 1)
        #expect(grid.index(after: point - 1) == k)
        #expect(grid.index(after: UInt64.max) == (UInt64.max - first) / interval + 1)
        #expect(grid.index(atOrBefore: UInt64.max) == (UInt64.max - first) / interval)
        // instant() wraps rather than trapping for indexes past the end of the clock.
        #expect(grid.instant(UInt64.max) == first &+ UInt64.max &* interval)
    }

    @Test("a grid starting at the top of the clock")
    func lateFirst() {
        let grid = FireGrid(first: UInt64.max - 5, interval: .seconds(1))
        #expect(grid.index(after: 0) == 0)
        #expect(grid.index(atOrBefore: UInt64.max - 6) == nil)
        #expect(grid.index(atOrBefore: UInt64.max) == 0)
        #expect(grid.index(after: UInt64.max) == 1)
    }

    @Test("non-positive intervals become 1 ns instead of dividing by zero")
    func zeroInterval() {
        #expect(FireGrid(first: 5, interval: .zero).interval == 1)
        #expect(FireGrid(first: 5, interval: .seconds(-3)).interval == 1)
        let grid = FireGrid(first: 5, interval: .zero)
        #expect(grid.index(after: 7) == 3)
        #expect(grid.index(atOrBefore: 7) == 2)
    }

    @Test("grids compare by first and interval")
    func gridEquality() {
        #expect(FireGrid(first: 1, interval: .seconds(1)) == FireGrid(first: 1, interval: .milliseconds(1_000)))
        #expect(FireGrid(first: 1, interval: .seconds(1)) != FireGrid(first: 2, interval: .seconds(1)))
    }
}
