import Testing
@testable import TimerdCore

/// Cron and calendar schedules in time zones, across DST changes, under each `dst_gap`/`dst_repeat` rule.
@Suite struct CivilScheduleTests {
    static func time(_ text: String) throws -> WallTime { try RFC3339.parse(text) }

    static func fires(_ cron: String, _ zone: String, from: String, count: Int,
                      gap: DSTGap? = nil, repeat repeatRule: DSTRepeat? = nil) throws -> [String] {
        let schedule = CivilSchedule(pattern: .cron(try CronExpression.parse(cron)), zone: try systemZone(zone),
                                     gap: gap, repeat: repeatRule)
        return schedule.upcoming(after: try time(from), count: count).map { RFC3339.format($0, in: schedule.zone) }
    }

    static func calendarFires(_ spec: String, _ zone: String, from: String, count: Int,
                              gap: DSTGap? = nil, repeat repeatRule: DSTRepeat? = nil) throws -> [String] {
        let schedule = CivilSchedule(pattern: .calendar(try CalendarSpec.parse(spec)), zone: try systemZone(zone),
                                     gap: gap, repeat: repeatRule)
        return schedule.upcoming(after: try time(from), count: count).map { RFC3339.format($0, in: schedule.zone) }
    }

    // MARK: - cron(8)'s defaults

    @Test func fixedTimeCronShiftsOutOfTheGapAndRunsOnceInTheRepeat() throws {
        // Berlin: 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET.
        #expect(try Self.fires("30 2 * * *", "Europe/Berlin", from: "2026-03-28T12:00:00Z", count: 2)
            == ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"])
        #expect(try Self.fires("30 2 * * *", "Europe/Berlin", from: "2026-10-24T12:00:00Z", count: 2)
            == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"])
        // New York: 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
        #expect(try Self.fires("15 2 * * *", "America/New_York", from: "2026-03-07T12:00:00Z", count: 2)
            == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:15:00-04:00"])
        #expect(try Self.fires("15 1 * * *", "America/New_York", from: "2026-10-31T12:00:00Z", count: 2)
            == ["2026-11-01T01:15:00-04:00", "2026-11-02T01:15:00-05:00"])
    }

    @Test func wildcardCronFollowsTheClock() throws {
        // `30 * * * *`: 02:30 does not exist in spring; both 02:30s run in autumn (hourly in real time).
        #expect(try Self.fires("30 * * * *", "Europe/Berlin", from: "2026-03-29T00:00:00Z", count: 3)
            == ["2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00", "2026-03-29T04:30:00+02:00"])
        #expect(try Self.fires("30 * * * *", "Europe/Berlin", from: "2026-10-24T23:00:00Z", count: 4)
            == ["2026-10-25T01:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"])
    }

    @Test func lordHoweMovesByHalfAnHour() throws {
        // 2026-10-04 02:00 (+10:30) → 02:30 (+11); 2026-04-05 02:00 (+11) → 01:30 (+10:30).
        #expect(try Self.fires("15 2 * * *", "Australia/Lord_Howe", from: "2026-10-03T00:00:00Z", count: 2)
            == ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"])
        #expect(try Self.fires("45 2 * * *", "Australia/Lord_Howe", from: "2026-10-03T00:00:00Z", count: 1)
            == ["2026-10-04T02:45:00+11:00"])
        #expect(try Self.fires("45 1 * * *", "Australia/Lord_Howe", from: "2026-04-04T00:00:00Z", count: 2,
                               repeat: .both)
            == ["2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30"])
        #expect(try Self.fires("45 1 * * *", "Australia/Lord_Howe", from: "2026-04-04T00:00:00Z", count: 2)
            == ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"])
    }

    @Test func overridesApplyToCalendarSpecsToo() throws {
        #expect(try Self.calendarFires("*-*-* 02:30", "Europe/Berlin", from: "2026-03-28T12:00:00Z", count: 1)
            == ["2026-03-30T02:30:00+02:00"])
        #expect(try Self.calendarFires("*-*-* 02:30", "Europe/Berlin", from: "2026-03-28T12:00:00Z", count: 1, gap: .shift)
            == ["2026-03-29T03:00:00+02:00"])
        #expect(try Self.calendarFires("*-*-* 02:30", "Europe/Berlin", from: "2026-10-24T12:00:00Z", count: 2, repeat: .last)
            == ["2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"])
    }

    @Test func leapDaysAndShortMonths() throws {
        #expect(try Self.fires("0 12 29 2 *", "Europe/Berlin", from: "2025-01-01T00:00:00Z", count: 2)
            == ["2028-02-29T12:00:00+01:00", "2032-02-29T12:00:00+01:00"])
        #expect(try Self.fires("0 0 31 * *", "UTC", from: "2026-01-31T12:00:00Z", count: 3)
            == ["2026-03-31T00:00:00+00:00", "2026-05-31T00:00:00+00:00", "2026-07-31T00:00:00+00:00"])
    }

    @Test func impossibleDatesEndTheScheduleWithoutHanging() throws {
        let clock = ContinuousClock()
        let started = clock.now
        #expect(try Self.fires("0 0 30 2 *", "Europe/Berlin", from: "2026-01-01T00:00:00Z", count: 1).isEmpty)
        #expect(try Self.calendarFires("*-02-30", "Europe/Berlin", from: "2026-01-01T00:00:00Z", count: 1).isEmpty)
        #expect(try Self.calendarFires("*-02-30", "Europe/Berlin", from: "2026-01-01T00:00:00Z", count: 1, gap: .skip).isEmpty)
        // Generous: only a hang or a per-second search would come near it.
        #expect(clock.now - started < .seconds(5))
    }

    // MARK: - The rules against their definition

    /// Brute force: every local minute in a window around each DST change of several zones, matched
    /// against the expression and mapped to instants by the rules, must give exactly the fires `next`
    /// finds one by one. This checks the ordering logic (second occurrences, shifted times) against
    /// the definition, for every rule combination.
    @Test(arguments: ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "America/Santiago", "America/Havana"])
    func nextAgreesWithTheDefinition(zoneName: String) throws {
        let zone = try systemZone(zoneName)
        let expressions = ["30 2 * * *", "*/20 * * * *", "0,15,30,45 1-3 * * *", "45 0 * * *", "0 * * * *", "10 23,0 * * *"]
        var transitions: [Int64] = []
        var t: Int64 = 1_767_225_600  // 2026-01-01
        var offset = zone.utcOffset(at: t)
        while t < 1_830_297_600 {  // 2028
            t += 3600
            let now = zone.utcOffset(at: t)
            if now != offset { transitions.append(t); offset = now }
        }
        #expect(transitions.count >= 4, "\(zoneName) has DST changes in 2026–2027")
        for text in expressions {
            let expression = try CronExpression.parse(text)
            for gap in DSTGap.allCases {
                for repeatRule in DSTRepeat.allCases {
                    let schedule = CivilSchedule(pattern: .cron(expression), zone: zone, gap: gap, repeat: repeatRule)
                    for transition in transitions {
                        let start = transition - 6 * 3600
                        let end = transition + 6 * 3600
                        // The definition.
                        var expected = Set<Int64>()
                        var local = (start + Int64(zone.utcOffset(at: start))) / 60 * 60 - 4 * 3600
                        while local < end + 14 * 3600 {
                            if expression.matches(localSeconds: local) {
                                for micros in schedule.instants(ofLocal: local * 1_000_000) where micros / 1_000_000 > start && micros / 1_000_000 <= end {
                                    expected.insert(micros / 1_000_000)
                                }
                            }
                            local += 60
                        }
                        // `next`, one by one.
                        var found: [Int64] = []
                        var cursor = WallTime(seconds: start)
                        while let next = schedule.next(after: cursor), next.nanosecondsSinceEpoch / 1_000_000_000 <= end {
                            found.append(next.nanosecondsSinceEpoch / 1_000_000_000)
                            cursor = next
                        }
                        #expect(found == expected.sorted(),
                                "\(zoneName) \(text) gap=\(gap) repeat=\(repeatRule) around \(transition)")
                    }
                }
            }
        }
    }
}
