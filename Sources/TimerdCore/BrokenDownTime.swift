/// A broken-down local time with C's `struct tm` conventions (years since 1900, months 0–11, fields that
/// may be out of range before normalisation), so that calendar arithmetic ported from C code that works on
/// `struct tm` (systemd's calendar specs) behaves exactly like the original.
public struct BrokenDownTime: Hashable, Sendable {
    /// Years since 1900 (`tm_year`).
    public var year: Int
    /// Months since January, 0–11 (`tm_mon`).
    public var month: Int
    /// Day of the month, 1–31 (`tm_mday`).
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int
    /// Days since Sunday, 0–6 (`tm_wday`); set by `localTime` and `makeTime`, ignored on input.
    public var weekday: Int
    /// Days since January 1, 0–365 (`tm_yday`); set by `localTime` and `makeTime`, ignored on input.
    public var yearDay: Int
    /// `tm_isdst`: positive when daylight saving time is in effect, 0 when not, negative when unknown
    /// (`makeTime` then works it out).
    public var isDST: Int
    /// Seconds east of UTC (`tm_gmtoff`); set by `localTime` and `makeTime`, ignored on input.
    public var utcOffset: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0,
                weekday: Int = 0, yearDay: Int = 0, isDST: Int = -1, utcOffset: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
        self.weekday = weekday
        self.yearDay = yearDay
        self.isDST = isDST
        self.utcOffset = utcOffset
    }

    /// The full year (`year + 1900`).
    public var fullYear: Int { year + 1900 }
}

/// The two C calls calendar arithmetic needs, for one time zone: `localtime_r` and `mktime`.
///
/// `makeTime` keeps glibc's `mktime` semantics, including its one piece of state: the UTC offset it found
/// last time, which is its first guess next time and decides which of two instants an ambiguous local time
/// (a fall-back's repeated hour) means when `isDST` is negative. The caller owns that state (`guess`), so
/// computations are repeatable and independent of each other.
public protocol LocalTimeConversion: Sendable {
    /// The local time at `utcSeconds` (seconds since the Unix epoch). The corresponding C function is
    /// `localtime_r`.
    func localTime(_ utcSeconds: Int64) -> BrokenDownTime
    /// The UTC instant of `time`, normalising `time` in place as glibc's `mktime` does (out-of-range fields
    /// carry; a time inside a spring-forward gap comes back shifted). `guess` is `mktime`'s remembered
    /// offset (UTC minus local, in seconds); start a computation with `-localTime(base).utcOffset`.
    /// Returns nil where `mktime` returns -1.
    func makeTime(_ time: inout BrokenDownTime, guess: inout Int64) -> Int64?
}
