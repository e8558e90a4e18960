/// The system's tz database: IANA zone names to `ZoneRules`, read through an injected file reader so the
/// daemon, `timerctl` and the config checker share one lookup and tests can feed it bytes.
public struct TimeZoneDatabase: Sendable {
    /// The directory holding the TZif files (`TZDIR`, default `/usr/share/zoneinfo`).
    public var directory: String
    private let read: @Sendable (String) -> [UInt8]?

    public init(directory: String = "/usr/share/zoneinfo", read: @escaping @Sendable (String) -> [UInt8]?) {
        self.directory = directory
        self.read = read
    }

    /// The rules of the zone called `name` (`Europe/Berlin`, `UTC`). An unknown name is an error, never
    /// silently UTC.
    ///
    /// Throws `bad-argument` (key `timezone`) for a malformed or unknown name or an unusable file.
    public func zone(named name: String) throws(TimerdError) -> ZoneRules {
        try Self.zone(named: name, directory: directory, read: read)
    }

    /// `zone(named:)` with a reader that need not outlive the call (the config checker's file system).
    public static func zone(
        named name: String, directory: String = "/usr/share/zoneinfo", read: (String) -> [UInt8]?
    ) throws(TimerdError) -> ZoneRules {
        try validate(name)
        guard let bytes = read("\(directory)/\(name)") else {
            if name == "UTC" { return .utc }
            throw TimerdError(
                .badArgument,
                "unknown time zone \"\(name)\": no such zone in \(directory) (`timedatectl list-timezones` lists them)",
                key: "timezone")
        }
        return try ZoneRules(tzif: bytes, name: name)
    }

    /// The zone timerd uses when a job names none: `TZ` when set (a zone name, `:name`, or a POSIX rule
    /// such as `CET-1CEST,M3.5.0,M10.5.0/3`), else the zone `/etc/localtime` links to, else UTC.
    /// `localtimeTarget` is where the `/etc/localtime` symlink points, if it is one.
    public func systemZone(tz: String?, localtimeTarget: String?) -> ZoneRules {
        if var tz, !tz.isEmpty {
            if tz.hasPrefix(":") { tz.removeFirst() }
            if let zone = try? zone(named: tz) { return zone }
            if let zone = try? ZoneRules(posix: tz) { return zone }
        }
        if let target = localtimeTarget, let name = Self.nameAfterZoneinfo(target),
           let zone = try? zone(named: name) {
            return zone
        }
        if let bytes = read("/etc/localtime"), let zone = try? ZoneRules(tzif: bytes, name: "localtime") {
            return zone
        }
        return .utc
    }

    /// `Europe/Berlin` from `/usr/share/zoneinfo/Europe/Berlin`.
    static func nameAfterZoneinfo(_ path: String) -> String? {
        let marker = Array("zoneinfo/".utf8)
        let bytes = Array(path.utf8)
        guard bytes.count > marker.count else { return nil }
        for start in stride(from: bytes.count - marker.count, through: 0, by: -1)
        where Array(bytes[start..<start + marker.count]) == marker {
            let name = bytes[(start + marker.count)...]
            return name.isEmpty ? nil : String(decoding: name, as: UTF8.self)
        }
        return nil
    }

    /// Zone names are paths below the database directory: letters, digits and `_+-`, in components that
    /// never start with a dot, so a name cannot climb out of it.
    static func validate(_ name: String) throws(TimerdError) {
        let allowed = name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: "-"),
                 UInt8(ascii: "/"), UInt8(ascii: "."):
                return true
            default:
                return false
            }
        }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, name.utf8.count <= 255, allowed,
              components.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") && !$0.hasPrefix("-") }) else {
            throw TimerdError(.badArgument, "invalid time zone name \"\(name)\" (expected an IANA name such as Europe/Berlin or UTC)", key: "timezone")
        }
    }
}
