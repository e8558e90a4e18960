import Testing
@testable import TimerdCore

@Suite("Schedule")
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
}
