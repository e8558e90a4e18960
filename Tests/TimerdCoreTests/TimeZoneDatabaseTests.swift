import Foundation
import Testing
@testable import TimerdCore

/// Zone names → rules through an injected reader, and the system zone's fallbacks.
@Suite struct TimeZoneDatabaseTests {
    static let database = TimeZoneDatabase { path in try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) }

    @Test func knownZonesLoad() throws {
        #expect(try Self.database.zone(named: "Europe/Berlin").name == "Europe/Berlin")
        #expect(try Self.database.zone(named: "UTC").utcOffset(at: 0) == 0)
        // UTC works even where the database lacks it.
        let empty = TimeZoneDatabase { _ in nil }
        #expect(try empty.zone(named: "UTC") == .utc)
    }

    @Test(arguments: ["Europe/Berln", "Mars/Olympus", "Europe"])
    func unknownZonesAreErrorsNeverUTC(name: String) {
        expectError(.badArgument, key: "timezone", mentions: [name]) { try Self.database.zone(named: name) }
    }

    @Test(arguments: ["", "../../etc/passwd", "/etc/localtime", "Europe/../../x", "Europe//Berlin", ".hidden", "-x", "Europe/Berlin\n", "Europe/Berlin "])
    func namesCannotLeaveTheDatabase(name: String) {
        expectError(.badArgument, key: "timezone", mentions: ["invalid time zone name"]) { try Self.database.zone(named: name) }
    }

    @Test func filesThatAreNotZonesAreRefused() {
        expectError(.badArgument, key: "timezone", mentions: ["zone.tab", "not a usable tz database file"]) {
            try Self.database.zone(named: "zone.tab")
        }
    }

    @Test func theSystemZoneComesFromTZThenLocaltime() {
        #expect(Self.database.systemZone(tz: "Europe/Berlin", localtimeTarget: nil).name == "Europe/Berlin")
        #expect(Self.database.systemZone(tz: ":America/New_York", localtimeTarget: nil).name == "America/New_York")
        // A POSIX rule string works too.
        let posix = Self.database.systemZone(tz: "CET-1CEST,M3.5.0,M10.5.0/3", localtimeTarget: nil)
        #expect(posix.utcOffset(at: 1_784_000_000) == 7200)
        #expect(Self.database.systemZone(tz: nil, localtimeTarget: "/usr/share/zoneinfo/Asia/Kolkata").name == "Asia/Kolkata")
        #expect(Self.database.systemZone(tz: "", localtimeTarget: "/usr/share/zoneinfo/Asia/Kolkata").name == "Asia/Kolkata")
        let nothing = TimeZoneDatabase { _ in nil }
        #expect(nothing.systemZone(tz: nil, localtimeTarget: nil) == .utc)
    }
}
