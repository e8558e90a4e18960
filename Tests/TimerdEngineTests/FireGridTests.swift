import Testing
import TimerdCore
@testable import TimerdEngine

/// The monotonic grid of a repeating job: `first + k·interval`.
@Suite struct FireGridTests {
    static func at(_ nanoseconds: UInt64) -> MonoInstant { MonoInstant(nanosecondsSinceBoot: nanoseconds) }

    @Test func instantsAreFirstPlusKIntervals() {
        let grid = FireGrid(first: Self.at(1_000), interval: .nanoseconds(250))
        #expect((0..<5).map { grid.instant(Int64($0)).nanosecondsSinceBoot } == [1_000, 1_250, 1_500, 1_750, 2_000])
    }

    /// (time, index(after:), index(atOrBefore:)) for first = 1000, interval = 100.
    @Test(arguments: [
        (0, 0, nil), (999, 0, nil), (1_000, 1, 0), (1_001, 1, 0), (1_099, 1, 0), (1_100, 2, 1), (1_101, 2, 1), (10_000, 91, 90),
    ] as [(UInt64, Int64, Int64?)])
    func indexes(time: UInt64, after: Int64, atOrBefore: Int64?) {
        let grid = FireGrid(first: Self.at(1_000), interval: .nanoseconds(100))
        #expect(grid.index(after: Self.at(time)) == after)
        #expect(grid.index(atOrBefore: Self.at(time)) == atOrBefore)
    }

    @Test(arguments: [21, 22, 23] as [UInt64])
    func indexLawsHoldForRandomGridsAndTimes(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<5_000 {
            let first = Self.at(UInt64.random(in: 0...(1 << 50), using: &random))
            let grid = FireGrid(first: first, interval: .nanoseconds(Int64.random(in: 10_000_000...86_400_000_000_000, using: &random)))
            let time = Self.at(UInt64.random(in: 0...(1 << 52), using: &random))
            let next = grid.index(after: time)
            #expect(grid.instant(next) > time)
            if next > 0 { #expect(grid.instant(next - 1) <= time) }
            if let last = grid.index(atOrBefore: time) {
                #expect(grid.instant(last) <= time && grid.instant(last + 1) > time && next == last + 1)
            } else {
                #expect(time < first && next == 0)
            }
        }
    }

    @Test func hugeIndexesAndLateInstants() {
        // A 10 ms grid starting at an uptime of 1 day, asked about a time ~58 years later.
        let grid = FireGrid(first: Self.at(86_400_000_000_000), interval: .milliseconds(10))
        let k: Int64 = 184_467_440_000
        let point = Self.at(86_400_000_000_000 + UInt64(k) * 10_000_000)
        #expect(grid.instant(k) == point)
        #expect(grid.index(atOrBefore: point) == k)
        #expect(grid.index(after: point) == k + 1)
    }

    @Test func monoArithmeticSaturatesInsteadOfWrapping() {
        #expect(MonoInstant.zero - .seconds(1) == .zero)
        #expect(Self.at(.max) + .seconds(1) == Self.at(.max))
        #expect(Self.at(5) - Self.at(8) == .nanoseconds(-3))
        let now = Instant(mono: Self.at(1_000_000_000), wall: WallTime(seconds: 100))
        #expect(now.wall(of: Self.at(3_000_000_000)) == WallTime(seconds: 102))
        #expect(now.mono(of: WallTime(seconds: 99)) == Self.at(0))
    }
}
