import Foundation
import Glibc
import Testing
@testable import TimerdCore
import TimerdTestSupport

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

/// ZoneRules against glibc itself: `localtime_r` and `mktime`, zone by zone. glibc computes in
/// timerd-test-helper, started with `TZ` set to the zone: TZ is process-wide, and setting it here would change
/// the local zone of every other test running at the same time, and of every child they start.
@Suite struct ZoneRulesTests {
    /// glibc's answers to `requests` (the helper's `tz` lines: `local T`, `mktime Y MON MDAY H M S ISDST`),
    /// made one after another by one process in `zone`, so mktime's remembered offset evolves as it would
    /// in a single sequence of calls. Each answer is the line's numbers (`[T] + struct tm`'s fields).
    static func glibc(_ zone: String, _ requests: [String]) throws -> [[Int64]] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try TestBinaries.helper())
        process.arguments = ["tz"]
        process.environment = ["TZ": zone]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        // Written from another thread while this one reads, so neither pipe can fill up and block both.
        let text = Data(requests.map { $0 + "\n" }.joined().utf8)
        DispatchQueue.global().async {
            input.fileHandleForWriting.write(text)
            try? input.fileHandleForWriting.close()
        }
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw GlibcOracleError("timerd-test-helper tz exited \(process.terminationStatus)") }
        let lines = answer.split(separator: "\n").map { $0.split(separator: " ").compactMap { Int64($0) } }
        guard lines.count == requests.count else { throw GlibcOracleError("\(lines.count) answers to \(requests.count) requests") }
        return lines
    }

    struct GlibcOracleError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A `struct tm` from the helper's fields: year mon mday hour min sec wday yday isdst gmtoff.
    static func tmFrom(_ fields: ArraySlice<Int64>) throws -> tm {
        let f = Array(fields)
        guard f.count == 10 else { throw GlibcOracleError("expected 10 fields of struct tm, got \(f)") }
        var result = tm()
        result.tm_year = Int32(f[0])
        result.tm_mon = Int32(f[1])
        result.tm_mday = Int32(f[2])
        result.tm_hour = Int32(f[3])
        result.tm_min = Int32(f[4])
        result.tm_sec = Int32(f[5])
        result.tm_wday = Int32(f[6])
        result.tm_yday = Int32(f[7])
        result.tm_isdst = Int32(f[8])
        result.tm_gmtoff = Int(f[9])
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
            let times = (0..<4000).map { _ in Int64.random(in: -2_208_988_800...7_258_118_400, using: &random) }
            let answers = try Self.glibc(name, times.map { "local \($0)" })
            for (t, answer) in zip(times, answers) {
                let theirs = try Self.tmFrom(answer[...])
                let ours = zone.localTime(t)
                expectSame(ours, theirs, "\(name) localtime(\(t))")
                if ours.utcOffset != Int(theirs.tm_gmtoff) { break }
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
            var requests: [BrokenDownTime] = []
            for transition in transitions {
                let local = zone.localTime(transition)
                for _ in 0..<6 {
                    var request = local
                    request.minute += Int.random(in: -150...150, using: &random)
                    request.second = Int.random(in: -5...64, using: &random)
                    request.isDST = Int.random(in: -1...1, using: &random)
                    if Bool.random(using: &random) { request.hour += 24 * Int.random(in: -1...1, using: &random) }
                    requests.append(request)
                }
            }
            // First, synchronise glibc's remembered offset with ours on an unambiguous time.
            let sync = BrokenDownTime(year: 100, month: 0, day: 15, hour: 12)
            let lines = ([sync] + requests).enumerated().map { index, time in
                "mktime \(time.year) \(time.month) \(time.day) \(time.hour) \(time.minute) \(time.second) \(index == 0 ? -1 : time.isDST)"
            }
            let answers = try Self.glibc(name, lines)
            let syncT = try #require(answers.first?.first)
            var guess = syncT - CivilClock.localSeconds(sync)
            var checked = 0
            for (request, answer) in zip(requests, answers.dropFirst()) {
                let theirT = try #require(answer.first)
                let theirs = try Self.tmFrom(answer.dropFirst())
                var ours = request
                let ourT = zone.makeTime(&ours, guess: &guess)
                #expect(ourT == theirT, "\(name) mktime(\(request)): ours \(String(describing: ourT)), glibc \(theirT)")
                expectSame(ours, theirs, "\(name) mktime(\(request)) fields")
                checked += 1
            }
            #expect(checked >= 300, "\(name): only \(checked) times probed")
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
