/// A set of exit statuses, as `success_exit_codes` takes it: numbers and ranges from 0 to 255, comma-separated
/// (`0`, `0,3`, `0-2,10`).
public enum ExitCodes {
    /// The statuses, sorted and each once. Throws `bad-argument` for `key`.
    public static func parse(_ text: String, key: String) throws(TimerdError) -> [Int] {
        let problem = TimerdError(
            .badArgument, "\(key): expected exit statuses from 0 to 255 and ranges of them, comma-separated (like 0,3 or 0-2), got \"\(text)\"",
            key: key)
        var codes = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = item.trimmingSpaces()
            let bounds = part.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard !bounds.isEmpty, bounds.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
                  let low = Int(bounds[0]), let high = Int(bounds.last!), low <= high, high <= 255 else { throw problem }
            codes.formUnion(low...high)
        }
        return codes.sorted()
    }

    /// `codes` (sorted) written back: runs of three or more as ranges (`0-2,10`).
    public static func format(_ codes: [Int]) -> String {
        var parts: [String] = []
        var index = 0
        while index < codes.count {
            var end = index
            while end + 1 < codes.count, codes[end + 1] == codes[end] + 1 { end += 1 }
            if end - index >= 2 {
                parts.append("\(codes[index])-\(codes[end])")
            } else {
                parts += codes[index...end].map(String.init)
            }
            index = end + 1
        }
        return parts.joined(separator: ",")
    }
}
