defmodule EchoMQ.JSONTest do
  use ExUnit.Case, async: true
  alias EchoMQ.JSON

  defp enc(v), do: v |> JSON.encode() |> IO.iodata_to_binary()

  test "decodes objects, arrays, literals and integers exactly" do
    assert JSON.decode(~s({"a": [1, -2, true, false, null], "b": {"c": "d"}})) ==
             {:ok, %{"a" => [1, -2, true, false, nil], "b" => %{"c" => "d"}}}

    assert JSON.decode("123456789012345678901234567890") == {:ok, 123_456_789_012_345_678_901_234_567_890}
    assert JSON.decode(" 0 ") == {:ok, 0}
    assert JSON.decode("-0") == {:ok, 0}
  end

  test "fractions and exponents are kept apart from integers" do
    assert JSON.decode("1.0") == {:ok, {:number, "1.0"}}
    assert JSON.decode("1e3") == {:ok, {:number, "1e3"}}
    assert JSON.decode("-2.5E-3") == {:ok, {:number, "-2.5E-3"}}
  end

  test "string escapes, unicode and surrogate pairs" do
    assert JSON.decode(~S("a\"b\\c\/d\n\t\r\b\f")) == {:ok, "a\"b\\c/d\n\t\r\b\f"}
    assert JSON.decode(~S("\u00e9\u20ac")) == {:ok, "é€"}
    assert JSON.decode(~S("\ud83d\ude00")) == {:ok, "😀"}
    assert JSON.decode(~s("héllo")) == {:ok, "héllo"}
    assert JSON.decode(~S("\u0000")) == {:ok, <<0>>}
  end

  test "malformed input is an error, never a crash" do
    for bad <- ["", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "+1", "tru", "\"abc", ~S("\ud800"),
                ~S("\x"), "\"a\nb\"", "[1] 2", "{1:2}", <<?", 0xFF, ?">>, "nul", "--1", "1.", ".5"] do
      assert {:error, _} = JSON.decode(bad), "expected an error for #{inspect(bad)}"
    end
  end

  test "encodes values, escaping what JSON requires" do
    assert enc(%{"seq" => 1, "ok" => nil}) == ~s({"ok":null,"seq":1})
    assert enc([1, true, false, "x"]) == ~s([1,true,false,"x"])
    assert enc("a\"b\\c\n\u0001") == ~S("a\"b\\c\n\u0001")
    assert enc("é😀") == ~s("é😀")
    assert enc(%{id: "j1", payload: "p"}) == ~s({"id":"j1","payload":"p"})
    assert enc(<<0xFF>>) == ~S("\ufffd")
  end

  test "round trip" do
    v = %{"s" => "line\nbreak \u2028 \"quoted\"", "n" => [0, -1, 2_147_483_647], "o" => %{}, "l" => []}
    assert JSON.decode(enc(v)) == {:ok, v}
  end
end
