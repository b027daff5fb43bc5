package kraft.tck;

import org.apache.spark.sql.api.java.UDF1;

/**
 * The counts the pipeline's per-line schema check reads from a trace line (kraft_tck.traces.pipeline.schema),
 * in one pass over the line instead of one Spark SQL replace per character (10M events: 89 s -> 66 s for the
 * parse and the check).
 *
 * <p>Returns colons | quotes << 21 | closing braces << 42, or null when the line cannot be judged by
 * counting: it holds a backslash (an escape such as \u003a hides a counted character) or a count does not
 * fit in 21 bits. A null clears nothing: the line goes to the JSON Schema validator.
 *
 * <p>All four characters are ASCII, so counting UTF-16 chars counts the same bytes Spark's replace does.
 */
public final class CharCounts implements UDF1<String, Long> {
    static final int BITS = 21;
    static final long LIMIT = (1L << BITS) - 1;

    @Override
    public Long call(String line) {
        if (line == null) {
            return null;
        }
        long colons = 0;
        long quotes = 0;
        long braces = 0;
        for (int i = 0, n = line.length(); i < n; i++) {
            switch (line.charAt(i)) {
                case ':' -> colons++;
                case '"' -> quotes++;
                case '}' -> braces++;
                case '\\' -> {
                    return null;
                }
                default -> { }
            }
        }
        if (colons > LIMIT || quotes > LIMIT || braces > LIMIT) {
            return null;
        }
        return colons | quotes << BITS | braces << (2 * BITS);
    }
}
