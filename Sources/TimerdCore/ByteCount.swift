/// Sizes in bytes as config keys take them: a whole number with an optional binary suffix
/// (`65536`, `512K`, `64M`, `1G`, `2T`; `KB`/`KiB`, `MB`/`MiB`, `GB`/`GiB`, `TB`/`TiB` mean the same).
public enum ByteCount {
    public static func parse(_ text: String) -> Int? {
        var digits = Substring(text)
        for unit in ["iB", "IB", "ib", "B", "b"] where digits.hasSuffix(unit) && digits.count > unit.count {
            let rest = digits.dropLast(unit.count)
            if let last = rest.last, "KkMmGgTt".contains(last) { digits = rest }
            break
        }
        var scale = 1
        switch digits.last {
        case "K", "k": scale = 1 << 10
        case "M", "m": scale = 1 << 20
        case "G", "g": scale = 1 << 30
        case "T", "t": scale = 1 << 40
        default: break
        }
        if scale != 1 { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(digits),
              number <= Int.max / scale else { return nil }
        return number * scale
    }

    /// `bytes` in the largest binary unit that divides it exactly (`512M`, `1G`, `4097`), as `parse` reads it.
    public static func format(_ bytes: UInt64) -> String {
        for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] where bytes != 0 && bytes % (1 << UInt64(shift)) == 0 {
            return "\(bytes >> UInt64(shift))\(unit)"
        }
        return String(bytes)
    }
}
