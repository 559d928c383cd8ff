defmodule EchoMQ.Slot do
  @moduledoc """
  Cluster key slots: CRC16 (XMODEM: poly 0x1021, init 0) of the key's hash tag, mod 16384.
  The hash tag is the text between the first `{` and the first `}` after it, when non-empty;
  otherwise the whole key (the Valkey Cluster specification's rule).
  """
  import Bitwise

  @table (for i <- 0..255 do
            Enum.reduce(1..8, bsl(i, 8), fn _, crc ->
              if band(crc, 0x8000) != 0,
                do: band(bxor(bsl(crc, 1), 0x1021), 0xFFFF),
                else: band(bsl(crc, 1), 0xFFFF)
            end)
          end)
         |> List.to_tuple()

  @spec crc16(binary()) :: non_neg_integer()
  def crc16(bin), do: crc16(bin, 0)

  defp crc16(<<>>, crc), do: crc

  defp crc16(<<b, rest::binary>>, crc),
    do: crc16(rest, bxor(band(bsl(crc, 8), 0xFFFF), elem(@table, band(bxor(bsr(crc, 8), b), 0xFF))))

  @spec hash_tag(binary()) :: binary()
  def hash_tag(key) do
    with {open, 1} <- :binary.match(key, "{"),
         rest = binary_part(key, open + 1, byte_size(key) - open - 1),
         {close, 1} when close > 0 <- :binary.match(rest, "}") do
      binary_part(rest, 0, close)
    else
      _ -> key
    end
  end

  @spec of_key(binary()) :: 0..16383
  def of_key(key), do: band(crc16(hash_tag(key)), 16383)
end
