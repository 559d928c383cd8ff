defmodule EchoMQ.JSON do
  @moduledoc """
  A small, strict JSON codec (Elixir 1.14 ships none and no Hex package is reachable).

  Decoding: objects become maps with binary keys, arrays lists, strings binaries (UTF-8),
  integers integers (arbitrary precision, so never rounded), `true`/`false`/`null` the atoms
  `true`/`false`/`nil`. A number with a fraction or an exponent decodes to `{:number, text}`
  so that validation can refuse it as "not an integer" without ever turning it into a float.

  Encoding: maps (binary or atom keys), lists, binaries, integers, booleans and `nil`.
  """

  @spec decode(binary()) :: {:ok, term()} | {:error, String.t()}
  def decode(bin) when is_binary(bin) do
    {value, rest} = value(skip_ws(bin))

    case skip_ws(rest) do
      "" -> {:ok, value}
      _ -> {:error, "trailing data after the JSON value"}
    end
  catch
    {:json_error, msg} -> {:error, msg}
  end

  defp fail(msg), do: throw({:json_error, msg})

  defp skip_ws(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip_ws(rest)
  defp skip_ws(bin), do: bin

  defp value(<<?{, rest::binary>>), do: object(skip_ws(rest), %{})
  defp value(<<?[, rest::binary>>), do: array(skip_ws(rest), [])
  defp value(<<?", rest::binary>>), do: string(rest, [])
  defp value(<<"true", rest::binary>>), do: {true, rest}
  defp value(<<"false", rest::binary>>), do: {false, rest}
  defp value(<<"null", rest::binary>>), do: {nil, rest}
  defp value(<<c, _::binary>> = bin) when c == ?- or c in ?0..?9, do: number(bin)
  defp value(""), do: fail("unexpected end of input")
  defp value(_), do: fail("unexpected character")

  defp object(<<?}, rest::binary>>, acc), do: {acc, rest}

  defp object(<<?", rest::binary>>, acc) do
    {key, rest} = string(rest, [])

    case skip_ws(rest) do
      <<?:, rest::binary>> ->
        {val, rest} = value(skip_ws(rest))
        acc = Map.put(acc, key, val)

        case skip_ws(rest) do
          <<?,, rest::binary>> -> object_key(skip_ws(rest), acc)
          <<?}, rest::binary>> -> {acc, rest}
          _ -> fail("expected ',' or '}' in an object")
        end

      _ ->
        fail("expected ':' in an object")
    end
  end

  defp object(_, _), do: fail("expected a string key in an object")

  defp object_key(<<?", _::binary>> = bin, acc), do: object(bin, acc)
  defp object_key(_, _), do: fail("expected a string key in an object")

  defp array(<<?], rest::binary>>, acc), do: {Enum.reverse(acc), rest}

  defp array(bin, acc) do
    {val, rest} = value(bin)

    case skip_ws(rest) do
      <<?,, rest::binary>> -> array_next(skip_ws(rest), [val | acc])
      <<?], rest::binary>> -> {Enum.reverse([val | acc]), rest}
      _ -> fail("expected ',' or ']' in an array")
    end
  end

  defp array_next(<<?], _::binary>>, _), do: fail("trailing comma in an array")
  defp array_next(bin, acc), do: array(bin, acc)

  # Strings: raw UTF-8 runs are copied as they are (validated at the end), escapes decoded.
  defp string(bin, acc) do
    case :binary.match(bin, [<<?">>, <<?\\>>]) do
      :nomatch ->
        fail("unterminated string")

      {pos, 1} ->
        <<chunk::binary-size(pos), c, rest::binary>> = bin
        check_chunk(chunk)
        acc = [acc | chunk]

        if c == ?" do
          {finish_string(acc), rest}
        else
          {piece, rest} = escape(rest)
          string(rest, [acc | piece])
        end
    end
  end

  defp check_chunk(chunk) do
    if :binary.match(chunk, for(c <- 0..31, do: <<c>>)) != :nomatch,
      do: fail("control character in a string")
  end

  defp finish_string(acc) do
    s = IO.iodata_to_binary(acc)
    if String.valid?(s), do: s, else: fail("invalid UTF-8 in a string")
  end

  defp escape(<<?", r::binary>>), do: {"\"", r}
  defp escape(<<?\\, r::binary>>), do: {"\\", r}
  defp escape(<<?/, r::binary>>), do: {"/", r}
  defp escape(<<?b, r::binary>>), do: {"\b", r}
  defp escape(<<?f, r::binary>>), do: {"\f", r}
  defp escape(<<?n, r::binary>>), do: {"\n", r}
  defp escape(<<?r, r::binary>>), do: {"\r", r}
  defp escape(<<?t, r::binary>>), do: {"\t", r}

  defp escape(<<?u, h::binary-size(4), r::binary>>) do
    cp = hex4(h)

    cond do
      cp in 0xD800..0xDBFF ->
        case r do
          <<?\\, ?u, l::binary-size(4), r2::binary>> ->
            lo = hex4(l)

            if lo in 0xDC00..0xDFFF,
              do: {<<0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)::utf8>>, r2},
              else: fail("lone surrogate in a \\u escape")

          _ ->
            fail("lone surrogate in a \\u escape")
        end

      cp in 0xDC00..0xDFFF ->
        fail("lone surrogate in a \\u escape")

      true ->
        {<<cp::utf8>>, r}
    end
  end

  defp escape(_), do: fail("bad escape in a string")

  defp hex4(h) do
    case Integer.parse(h, 16) do
      {n, ""} -> if String.match?(h, ~r/^[0-9a-fA-F]{4}$/), do: n, else: fail("bad \\u escape")
      _ -> fail("bad \\u escape")
    end
  end

  defp number(bin) do
    case Regex.run(~r/^-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/, bin, capture: :all) do
      [text | groups] ->
        <<_::binary-size(byte_size(text)), rest::binary>> = bin

        if Enum.all?(groups, &(&1 == "")),
          do: {String.to_integer(text), rest},
          else: {{:number, text}, rest}

      nil ->
        fail("bad number")
    end
  end

  # ---- encoding ----

  @spec encode(term()) :: iodata()
  def encode(nil), do: "null"
  def encode(true), do: "true"
  def encode(false), do: "false"
  def encode(n) when is_integer(n), do: Integer.to_string(n)
  def encode(f) when is_float(f), do: Float.to_string(f)
  def encode({:number, text}), do: text
  def encode(s) when is_binary(s), do: [?", escape_str(s), ?"]
  def encode(a) when is_atom(a), do: encode(Atom.to_string(a))
  def encode(l) when is_list(l), do: [?[, Enum.map_intersperse(l, ?,, &encode/1), ?]]

  def encode(m) when is_map(m) do
    pairs = m |> Enum.sort() |> Enum.map_intersperse(?,, fn {k, v} -> [encode(to_string(k)), ?:, encode(v)] end)
    [?{, pairs, ?}]
  end

  # Escapes what JSON requires; a byte that is not UTF-8 becomes U+FFFD (the engine may hold any
  # bytes; the wire must stay valid JSON).
  defp escape_str(s), do: esc(s, [])

  defp esc(<<>>, acc), do: acc
  defp esc(<<?", r::binary>>, acc), do: esc(r, [acc | "\\\""])
  defp esc(<<?\\, r::binary>>, acc), do: esc(r, [acc | "\\\\"])
  defp esc(<<?\n, r::binary>>, acc), do: esc(r, [acc | "\\n"])
  defp esc(<<?\r, r::binary>>, acc), do: esc(r, [acc | "\\r"])
  defp esc(<<?\t, r::binary>>, acc), do: esc(r, [acc | "\\t"])

  defp esc(<<c, r::binary>>, acc) when c < 0x20,
    do: esc(r, [acc | :io_lib.format("\\u~4.16.0b", [c])])

  defp esc(<<c, _::binary>> = s, acc) when c < 0x80 do
    # copy a run of plain ASCII at once
    n = plain_run(s, 0)
    <<run::binary-size(n), r::binary>> = s
    esc(r, [acc | run])
  end

  defp esc(<<cp::utf8, r::binary>>, acc), do: esc(r, [acc | <<cp::utf8>>])
  defp esc(<<_, r::binary>>, acc), do: esc(r, [acc | "\\ufffd"])

  defp plain_run(<<c, r::binary>>, n) when c >= 0x20 and c < 0x80 and c != ?" and c != ?\\,
    do: plain_run(r, n + 1)

  defp plain_run(_, n), do: n
end
