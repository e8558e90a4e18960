import Foundation
import Glibc
import Testing
@testable import TimerdCore

/// Loads a zone from the system's tz database the way the daemon does (TZif bytes → ZoneRules).
func systemZone(_ name: String) throws -> ZoneRules {
    let url = URL(fileURLWithPath: "/usr/share/zoneinfo/\(name)")
    return try ZoneRules(tzif: [UInt8](Data(contentsOf: url)), name: name)
}

/// Zones with every kind of rule that matters: one-hour DST both hemispheres, a 30-minute DST
/// (Lord_Howe), negative DST (Dublin), a change at midnight (Santiago, Havana), 45-minute offsets
/// (Chatham), no DST (Kolkata), and zones that abolished DST (Istanbul, Moscow).
let zonesUnderTest = [
    "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "America/Santiago",
    "America/Havana", "Pacific/Chatham", "Asia/Kolkata", "Europe/Istanbul", "Europe/Moscow", "Australia/Sydney",
    "UTC",
]

/// ZoneRules against glibc itself: `localtime_r` and `mktime` in the same process, zone by zone. The suite
/// changes the process's TZ, so it runs serialized and restores it.
@Suite(.serialized) struct ZoneRulesTests {
    static let lock = NSLock()

    func withTZ(_ name: String, _ body: () throws -> Void) rethrows {
        Self.lock.lock()
        defer {
            unsetenv("TZ")
            tzset()
            Self.lock.unlock()
        }
        setenv("TZ", name, 1)
        tzset()
        try body()
    }

    static func glibcLocal(_ t: Int64) -> tm {
        var time = time_t(t)
        var result = tm()
        localtime_r(&time, &result)
        return result
    }

    func expectSame(_ ours: BrokenDownTime, _ theirs: tm, _ context: String) {
        let same = ours.year == Int(theirs.tm_year) && ours.month == Int(theirs.tm_mon)
            && ours.day == Int(theirs.tm_mday) && ours.hour == Int(theirs.tm_hour)
            && ours.minute == Int(theirs.tm_min) && ours.second == Int(theirs.tm_sec)
            && ours.weekday == Int(theirs.tm_wday) && ours.yearDay == Int(theirs.tm_yday)
            && ours.isDST == Int(theirs.tm_isdst) && ours.utcOffset == Int(theirs.tm_gmtoff)
        #expect(same, "\(context): ours \(ours), glibc \(theirs)")
    }

    @Test func localTimeMatchesGlibcFrom1900To2200() throws {
        var random = SeededGenerator(seed: 11)
        for name in zonesUnderTest {
            let zone = try systemZone(name)
            withTZ(name) {
                for _ in 0..<4000 {
                    let t = Int64.random(in: -2_208_988_800...7_258_118_400, using: &random)
                    let theirs = Self.glibcLocal(t)
                    let ours = zone.localTime(t)
                    expectSame(ours, theirs, "\(name) localtime(\(t))")
                    if ours.utcOffset != Int(theirs.tm_gmtoff) { return }
                }
            }
        }
    }

    /// Times near each DST change from 2020 to 2060 (table and footer rule), in and around the gap and
    /// the repeated hour, with tm_isdst -1, 0 and 1 and out-of-range fields, through one sequence of calls
    /// so glibc's remembered offset and ours evolve together.
    @Test func makeTimeMatchesGlibcAroundTransitions() throws {
        var random = SeededGenerator(seed: 12)
        for name in zonesUnderTest {
            let zone = try systemZone(name)
            withTZ(name) {
                // Synchronise glibc's remembered offset with ours on an unambiguous time.
                var sync = tm()
                sync.tm_year = 100
                sync.tm_mon = 0
                sync.tm_mday = 15
                sync.tm_hour = 12
                sync.tm_isdst = -1
                let syncT = Int64(mktime(&sync))
                var guess = syncT - CivilClock.localSeconds(BrokenDownTime(year: 100, month: 0, day: 15, hour: 12))
                var checked = 0
                var transitions: [Int64] = []
                var t = Int64(1_577_836_800)  // 2020-01-01
                while t < 2_840_140_800 {  // 2060
                    let offset = zone.utcOffset(at: t)
                    // Next transition: step by days until the offset changes.
                    var next = t + 86_400
                    while next < 2_840_140_800, zone.utcOffset(at: next) == offset { next += 86_400 }
                    if next >= 2_840_140_800 { break }
                    var low = next - 86_400
                    var high = next
                    while high - low > 1 {
                        let mid = (low + high) / 2
                        if zone.utcOffset(at: mid) == offset { low = mid } else { high = mid }
                    }
                    transitions.append(high)
                    t = high + 3600
                }
                // Zones without DST get random instants instead.
                while transitions.count < 50 {
                    transitions.append(Int64.random(in: 0...4_102_444_800, using: &random))
                }
                for transition in transitions {
                    let local = zone.localTime(transition)
                    for _ in 0..<6 {
                        var request = local
                        request.minute += Int.random(in: -150...150, using: &random)
                        request.second = Int.random(in: -5...64, using: &random)
                        request.isDST = Int.random(in: -1...1, using: &random)
                        if Bool.random(using: &random) { request.hour += 24 * Int.random(in: -1...1, using: &random) }
                        var theirs = tm()
                        theirs.tm_year = Int32(request.year)
                        theirs.tm_mon = Int32(request.month)
                        theirs.tm_mday = Int32(request.day)
                        theirs.tm_hour = Int32(request.hour)
                        theirs.tm_min = Int32(request.minute)
                        theirs.tm_sec = Int32(request.second)
                        theirs.tm_isdst = Int32(request.isDST)
                        let theirT = Int64(mktime(&theirs))
                        var ours = request
                        let ourT = zone.makeTime(&ours, guess: &guess)
                        #expect(ourT == theirT, "\(name) mktime(\(request)): ours \(String(describing: ourT)), glibc \(theirT)")
                        expectSame(ours, theirs, "\(name) mktime(\(request)) fields")
                        checked += 1
                    }
                }
                #expect(checked >= 300, "\(name): only \(checked) times probed")
            }
        }
    }

    @Test func instantsOfLocalTimeAcrossDST() throws {
        let berlin = try systemZone("Europe/Berlin")
        func local(_ text: String) throws -> Int64 {
            try RFC3339.parse(text + "Z").nanosecondsSinceEpoch / 1_000_000_000
        }
        // 2026-03-29 02:30 does not exist: the clock jumped from 02:00 CET to 03:00 CEST at 01:00 UTC.
        #expect(berlin.instants(ofLocal: try local("2026-03-29T02:30:00")) == .skipped(transition: try local("2026-03-29T01:00:00")))
        // 2026-10-25 02:30 happens twice: at 00:30 UTC (CEST) and 01:30 UTC (CET).
        #expect(berlin.instants(ofLocal: try local("2026-10-25T02:30:00"))
            == .repeated(try local("2026-10-25T00:30:00"), try local("2026-10-25T01:30:00")))
        #expect(berlin.instants(ofLocal: try local("2026-10-25T03:00:00")) == .unique(try local("2026-10-25T02:00:00")))
        // Lord Howe moves by 30 minutes: 02:00 → 02:30 on 2026-10-04, so 02:15 is skipped but 02:45 exists.
        let lordHowe = try systemZone("Australia/Lord_Howe")
        guard case .skipped = lordHowe.instants(ofLocal: try local("2026-10-04T02:15:00")) else {
            Issue.record("02:15 should be skipped in Lord Howe on 2026-10-04")
            return
        }
        #expect(lordHowe.instants(ofLocal: try local("2026-10-04T02:45:00")) == .unique(try local("2026-10-03T15:45:00")))
    }

    @Test func posixRulesParse() throws {
        let berlin = try ZoneRules(posix: "CET-1CEST,M3.5.0,M10.5.0/3")
        #expect(berlin.utcOffset(at: 1_774_695_600) == 3600)  // 2026-03-28 11:00 UTC
        #expect(berlin.utcOffset(at: 1_774_864_800) == 7200)  // 2026-03-30 10:00 UTC
        let lordHowe = try ZoneRules(posix: "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0")
        #expect(lordHowe.utcOffset(at: 1_780_000_000) == 37_800)
        for bad in ["", "C", "CET", "CET-1CEST,M3.5.0", "CET-1CEST,M13.5.0,M10.5.0", "<+1030-10:30", "CET-1CEST,M3.5.0,M10.5.0/3x"] {
            #expect(throws: TimerdError.self, "\(bad)") { try ZoneRules(posix: bad) }
        }
    }

    @Test func refusesWhatIsNotATZifFile() {
        expectError(.badArgument, key: "timezone", mentions: ["Nowhere", "bad magic"]) {
            try ZoneRules(tzif: Array("# not a zone\n".utf8), name: "Nowhere")
        }
        expectError(.badArgument, key: "timezone", mentions: ["truncated"]) {
            // Version 1 header announcing 9 transitions and 1 type, then nothing.
            try ZoneRules(tzif: Array("TZif".utf8) + [UInt8](repeating: 0, count: 28) + [0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0], name: "Short")
        }
    }
}
